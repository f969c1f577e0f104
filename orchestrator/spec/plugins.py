"""The installed plug-ins described, as ``kappa executors`` lists them: the executors (with
their options) and the backends a spec can name (``backend:``); one that cannot be loaded
is listed with its error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.errors import UserInputError


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("NoneType", "None")


def model_options(model: Any) -> list[dict[str, Any]]:
    """Each field of an options model (an executor's ``Options``): name, type, default,
    description."""
    rows = []
    for name, field in model.model_fields.items():
        required = field.is_required()
        default = None if required else field.get_default(call_default_factory=True)
        rows.append({"name": name, "type": _type_name(field.annotation), "required": required,
                     "default": default, "description": field.description or ""})
    return rows


def describe(registry: Any, load: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per plug-in of ``registry``: its source and ``load(name)``, or its error."""
    found = []
    for name in registry:
        source = registry.source(name)
        entry: dict[str, Any] = {"name": name, "entry_point": source.value,
                                 "distribution": source.distribution}
        try:
            entry.update(load(name))
        except UserInputError as exc:
            entry["error"] = exc.problems[0].found if exc.problems else exc.summary
        found.append(entry)
    return found


def describe_backends() -> list[dict[str, Any]]:
    """Every registered backend, or the reason it cannot be loaded."""
    from orchestrator.backends import BACKENDS, get_backend

    def load(name: str) -> dict[str, Any]:
        get_backend(name)
        return {}

    return describe(BACKENDS, load)


def describe_executors() -> list[dict[str, Any]]:
    """Every registered executor, with its options or the reason it cannot be loaded."""
    from orchestrator.executors import EXECUTORS, executor_class

    def load(name: str) -> dict[str, Any]:
        cls = executor_class(name)
        return {"job_id_prefix": cls.job_id_prefix, "options": model_options(cls.Options)}

    return describe(EXECUTORS, load)
