"""Turn pydantic validation errors into kappa's located, all-at-once problems."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from orchestrator.errors import Problem, UserInputError

M = TypeVar("M", bound=BaseModel)

_SHOULD = "Input should be "


def union_members(annotation: Any) -> list[Any]:
    """The types a field's annotation joins, through unions and ``Annotated`` (whose metadata
    comes along, matching no type)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, typing.Annotated):
        return [m for arg in typing.get_args(annotation) for m in union_members(arg)]
    return [annotation]


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The one settings model a field holds (through ``X | None``), else ``None``."""
    found = [m for m in union_members(annotation)
             if isinstance(m, type) and issubclass(m, BaseModel)]
    return found[0] if len(found) == 1 else None


def _setting_path(model: type[BaseModel], loc: Sequence[int | str]) -> tuple[int | str, ...]:
    """``loc`` cut after its last setting name (pydantic appends union members' tags,
    ``float``, ``literal['inf']``, and positions inside a value: no setting the user wrote)."""
    path: list[int | str] = []
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            break
        field = current.model_fields.get(str(part)) if isinstance(part, str) else None
        if field is None:
            # A key the model does not know (extra_forbidden) is still the user's word.
            if isinstance(part, str):
                path.append(part)
            break
        path.append(part)
        current = _submodel(field.annotation)
    return tuple(path)


def _merged_message(messages: Sequence[str]) -> str:
    """One message for a value every member of a union refused."""
    if len(messages) == 1:
        return messages[0]
    if all(m.startswith(_SHOULD) for m in messages):
        return _SHOULD + " or ".join(m[len(_SHOULD):] for m in messages)
    return "; or ".join(messages)


def problems_from_validation_error(exc: ValidationError,
                                   model: type[BaseModel] | None = None) -> list[Problem]:
    """One :class:`Problem` per pydantic error, located by dotted path; with ``model``
    (the model validated), locations stop at setting names, and the errors a union's
    members give for one value become one problem."""
    grouped: dict[tuple[int | str, ...], list[dict[str, Any]]] = {}
    for err in exc.errors():
        loc = tuple(err["loc"])
        key = _setting_path(model, loc) if model is not None and loc else loc
        grouped.setdefault(key, []).append(dict(err))
    problems = []
    for loc, errs in grouped.items():
        location = ".".join(str(part) for part in loc)
        found, kind = errs[0].get("input"), errs[0].get("type", "")
        # "Value error, " is pydantic's prefix for a validator's own message.
        messages = list(dict.fromkeys(str(e["msg"]).removeprefix("Value error, ") for e in errs))
        message = "unknown setting" if kind == "extra_forbidden" else _merged_message(messages)
        problems.append(Problem(location=location, message=message, found=None if (
            found is None or kind == "missing") else repr(found)[:200]))
    return problems


def validate_model(model: type[M], data: Mapping[str, Any], what: str) -> M:
    """Validate ``data`` against ``model``; raise one ``UserInputError`` listing every problem."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        problems = problems_from_validation_error(exc, model)
        raise UserInputError(f"invalid {what}", problems) from None
