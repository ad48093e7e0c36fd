"""Names for decoded JSON and YAML documents (json.loads, yaml.safe_load, the Kubernetes and Ray APIs).

An object's keys are strings (JSON's rule); its values are whatever the document holds, so they stay `Any` until the
code that reads them narrows them (isinstance, or the manifest's schema checked first). A path into a document is a
list of keys and indexes, as JSON Pointer and the validators' messages spell it.
"""

from __future__ import annotations

from typing import Any, TypeAlias

JsonObject: TypeAlias = dict[str, Any]
JsonArray: TypeAlias = list[Any]
JsonPath: TypeAlias = list[str | int]
