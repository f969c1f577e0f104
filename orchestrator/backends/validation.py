"""Turn pydantic validation errors into kappa's located, all-at-once problems."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from orchestrator.errors import Problem, UserInputError

M = TypeVar("M", bound=BaseModel)


def problems_from_validation_error(exc: ValidationError, prefix: str = "") -> list[Problem]:
    """One :class:`Problem` per pydantic error, located by dotted path."""
    problems = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"])
        location = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
        found = err.get("input")
        kind = err.get("type", "")
        message = str(err["msg"])
        fix = None
        if kind == "extra_forbidden":
            message = "unknown setting"
        problems.append(
            Problem(location=location, message=message,
                    found=None if found is None or kind == "missing" else repr(found)[:200],
                    fix=fix)
        )
    return problems


def validate_model(model: type[M], data: Mapping[str, Any], what: str, prefix: str = "") -> M:
    """Validate ``data`` against ``model``; raise one ``UserInputError`` listing every problem."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        problems = problems_from_validation_error(exc, prefix)
        raise UserInputError(f"invalid {what}", problems) from None
