"""The test suite's own scheduling: every module that needs the CDK set-up runs in the same xdist worker."""

from __future__ import annotations

from pathlib import Path

from conftest import CDK_MODULES, REPO_ROOT

# Session fixtures that synthesize the platform, and helpers that start cfn-lint or build CDK Apps.
CDK_FIXTURES = {"platform_assembly", "templates", "assembly_for"}
CDK_HELPERS = {"cfn_lint_errors", "cdk_json_context"}


def test_modules_that_need_the_cdk_set_up_are_scheduled_together(request):
    needing = set()
    for item in request.session.items:
        module = item.module
        if CDK_FIXTURES & set(item.fixturenames) or CDK_HELPERS & set(vars(module)):
            needing.add(Path(module.__file__).resolve().relative_to(REPO_ROOT).as_posix())
    assert needing, "no test module uses the CDK fixtures: the check below would pass vacuously"
    assert needing <= CDK_MODULES, f"add to conftest.CDK_MODULES: {sorted(needing - CDK_MODULES)}"
