"""`review BASE HEAD`: offline diff of two synthesized outputs, as Markdown for a pull-request comment.

BASE and HEAD are each a cloud assembly directory (`cdk.out`, holding manifest.json) or a directory that
holds `cdk.out/`, the cdk8s `dist/` manifests and optionally `cost.json` (`skyrl-hp cost --json` of that
side). Nothing is synthesized here.

Which source decides which verdict (see docs/review-gate.md):

- REPLACE: a changed property is in the resource schema's `createOnlyProperties` (the CloudFormation
  resource provider schemas cfn-lint ships), or the CDK service spec that `cdk diff` reads
  (`node_modules/aws-cdk/db.json.gz`, `causesReplacement: yes`, nested property types included) says so
  and the service's own API model (botocore) does not contradict it.
- REPLACE OR FAILED UPDATE: a nested field that the service's Create operation takes but its Update
  operation has no field for (botocore's API models), when neither source above lists it.
- MAY REPLACE: the schema's `conditionalCreateOnlyProperties`, `causesReplacement: maybe`, or the CDK spec
  says replacement while the Update operation accepts the field (the sources disagree).
- A replaced resource replaces every consumer whose create-only property reads it, in its own stack
  (Ref, Fn::GetAtt, Fn::Sub) or in another (Fn::GetStackOutput, Fn::ImportValue, resolved back to the
  producing resource through the producer's outputs), repeated until nothing new is replaced.
- Disruptive in-place updates (HyperPod node replacement, a RayService that KubeRay rebuilds) come from a
  curated table, each row with its primary source, for facts no machine-readable source has.

Where what lives: readers.py (both sides from disk), replacement.py (the replacement facts above), diff.py (the
diff and the cross-stack propagation), rules/ (one rule per file; rules/__init__.py is the registry and says how
to add one), render.py (the Markdown), pipeline.py (`review()`: read, diff, run the rules), model.py (the types they
share).
"""

from __future__ import annotations

from .model import Review, ReviewError
from .pipeline import review
from .render import render_markdown
from .replacement import DEFAULT_SCHEMA_REGION, DEFAULT_SERVICE_SPEC, ReplacementFacts

__all__ = [
    "DEFAULT_SCHEMA_REGION",
    "DEFAULT_SERVICE_SPEC",
    "ReplacementFacts",
    "Review",
    "ReviewError",
    "render_markdown",
    "review",
]
