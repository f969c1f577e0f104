"""JSON Schema of the spec, with each backend's settings schema for ``base``: what editors
validate a spec with (``# yaml-language-server: $schema=...`` or a schema mapping)."""

from __future__ import annotations

import copy
from typing import Any

from orchestrator.errors import KappaError
from orchestrator.spec.model import Spec


def spec_json_schema() -> dict[str, Any]:
    """The spec's JSON Schema; ``base`` is checked against the chosen backend's settings."""
    from orchestrator.backends import BACKENDS, get_backend

    schema = copy.deepcopy(Spec.model_json_schema())
    schema["title"] = "kappa experiment spec"
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    names, branches = [], []
    for name in sorted(BACKENDS):
        try:
            model = get_backend(name).settings_model
        except (ImportError, KappaError):  # a backend whose extras are missing: no schema
            continue
        settings = copy.deepcopy(model.model_json_schema(ref_template="#/$defs/{model}"))
        defs.update(settings.pop("$defs", {}))
        key = f"{name}_settings"
        defs[key] = settings
        names.append(name)
        branches.append({"if": {"properties": {"backend": {"const": name}}},
                         "then": {"properties": {"base": {"$ref": f"#/$defs/{key}"}}}})
    if branches:
        schema["properties"]["backend"]["enum"] = names
        schema["allOf"] = branches
    return schema
