"""Load a spec: YAML text -> :class:`Spec`, with every problem located in the file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from orchestrator.errors import Problem, UserInputError
from orchestrator.limits import MAX_PROBLEMS, more_problems
from orchestrator.paths import RESERVED_SUFFIXES, reserved_suffix
from orchestrator.spec.model import AXIS_TAGS, Resources, Spec
from orchestrator.spec.seeds_block import SeedsSpec
from orchestrator.spec.settings_paths import did_you_mean
from orchestrator.spec.stop_block import DivergedRule, PlateauRule, StopRules, ThresholdRule
from orchestrator.spec.yaml_limits import read_yaml_file
from orchestrator.spec.yaml_source import SourceDocument, dotted, load_yaml

# Top-level keys that shape nothing in the grid. When only these are wrong, checking goes
# on with a stand-in value so that one run reports the grid's problems too.
_LEAF_STAND_INS: dict[str, Any] = {"name": "invalid-name", "description": "",
                                   "resources": None, "retries": None, "stop": None,
                                   "search": None, "seeds": None}

# Member tags pydantic appends to locations inside a union of scalar types.
_SCALAR_TAGS = frozenset({"bool", "int", "float", "str", "none"})
_SCALARS = "a string, number, boolean or null"
_AXIS_RULE = ("ASCII letters, digits and _, not starting with a digit; dots for nested "
              "settings (model.d_model)")
_NAME_RULES = {"name": "lowercase letters, digits, '.', '_' and '-', starting with a "
               "letter or digit; at most 100 characters"}
_A_LIST = "should be a list ([a, b] or one '- item' per line)"
_PLAIN_TYPES = {"tuple_type": _A_LIST, "list_type": _A_LIST,
                "dict_type": "should be a mapping (key: value)"}


def _problems(exc: ValidationError, doc: SourceDocument) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[tuple[Any, ...]] = set()
    errors = exc.errors()
    for n, err in enumerate(errors):
        if len(problems) >= MAX_PROBLEMS:
            problems.append(more_problems(len(errors) - n))
            break
        loc = list(err["loc"])
        if err["type"] == "too_short" and any(
                len(o["loc"]) > len(loc) and list(o["loc"][: len(loc)]) == loc for o in errors):
            continue  # "too short after validation" only because an item is invalid
        # Pydantic locates a bad mapping key as "<path>.<key>.[key]": the key is the path.
        is_key = bool(loc) and loc[-1] == "[key]"
        loc = loc[:-1] if is_key else loc
        in_scalar_union = len(loc) > 1 and loc[-1] in _SCALAR_TAGS
        loc = loc[:-1] if in_scalar_union else loc
        # Tags of the axis union are pydantic's, not the user's: drop them.
        path = tuple(p for i, p in enumerate(loc)
                     if not (i == 2 and loc[0] == "axes" and p in AXIS_TAGS))
        key = (path, "scalar" if in_scalar_union else err["type"])
        if key in seen:
            continue
        seen.add(key)
        message, allowed, fix = str(err["msg"]), None, None
        found: str | None = repr(err.get("input"))[:200]
        if err["type"] == "string_pattern_mismatch" and path:
            is_variant = path[0] == "axes" and len(path) == 3
            message = "not a valid variant name" if is_variant else "not a valid name"
            found = repr(path[-1]) if is_key else found
            allowed = "no spaces" if is_variant else _NAME_RULES.get(str(path[0]), _AXIS_RULE)
        elif in_scalar_union:
            message, allowed = "axis values must be scalars", _SCALARS
            fix = "for structured values, use an axis of named variants"
        elif err["type"] == "extra_forbidden":
            field = str(path[-1])
            message, found = "unknown key", repr(field)
            known = _known_keys(path[:-1])
            allowed, fix = ", ".join(sorted(known)) or None, did_you_mean(field, known)
        elif err["type"] == "missing":
            found = None
            fix = f"add {path[-1]}:"
        elif err["type"] in _PLAIN_TYPES:
            # Pydantic names Python types; the user wrote YAML.
            message = _PLAIN_TYPES[err["type"]]
        elif path == ("phases",):
            message = "phases are reserved for multi-phase cells and not supported yet"
            allowed, fix = "(leave it out)", "remove phases"
        problems.append(doc.problem(path, dotted(path), message, found, allowed, fix))
    return problems


def _known_keys(path: tuple[Any, ...]) -> list[str]:
    models: dict[tuple[Any, ...], type[BaseModel]] = {
        (): Spec, ("resources",): Resources, ("stop",): StopRules,
        ("stop", "plateau"): PlateauRule, ("stop", "threshold"): ThresholdRule,
        ("seeds",): SeedsSpec}
    in_diverged = path[:2] == ("stop", "diverged") and len(path) == 3
    model: type[BaseModel] | None = DivergedRule if in_diverged else models.get(tuple(path))
    return [] if model is None else [f.alias or name for name, f in model.model_fields.items()]


@dataclass(frozen=True)
class SpecReading:
    """A spec read from YAML, and its problems as far as the spec alone tells. ``axes_sound``:
    the axes can be expanded (cross-reference problems are in ``exclude``/``include`` only;
    ``selections_sound``: none), so the cells' problems can join the same report."""

    spec: Spec
    problems: tuple[Problem, ...]
    axes_sound: bool
    selections_sound: bool


def read_spec(text: str, filename: str = "<spec>", path: Path | None = None,
              overrides: Sequence[str] = ()) -> SpecReading:
    """Parse a spec from YAML text (edited first by ``overrides``: ``source_text`` is then the
    resolved YAML) and check it against itself and its backend. ``UserInputError`` only if
    no spec can be made at all; else the problems come with it (stand-ins for wrong leaf
    keys), so the cells' problems join the same report (``grid.plan.parse_plan``)."""
    from orchestrator.backends import BACKENDS, get_backend
    from orchestrator.spec.references import check_references, search_problems, stop_problems
    from orchestrator.spec.seeds_axis import seeds_problems

    doc = load_yaml(text, filename)
    data = doc.data
    if not isinstance(data, dict):
        raise UserInputError(f"{filename}: not a spec", [
            doc.problem((), "", "a spec is a YAML mapping (name:, backend:, base:, axes:, ...)",
                        found=type(data).__name__) if data is not None
            else Problem(location="", message="the spec file is empty", file=filename,
                         line=1, column=1, fix="start with name: my-sweep")])
    if overrides:
        from orchestrator.spec.overrides import resolve

        doc, text = resolve(doc, overrides)
        data = doc.data
    deferred: list[Problem] = []
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        deferred = _problems(exc, doc)
        try:
            spec = Spec.model_validate(_with_leaf_stand_ins(data, exc))
        except ValidationError:
            raise UserInputError(f"{filename}: invalid spec", deferred) from None
    spec._source_text = text
    spec._path = path
    spec._filename = filename
    spec._document = doc
    if spec.backend not in BACKENDS:
        raise UserInputError(f"{filename}: invalid spec", [*deferred, spec.problem(
            ("backend",), "unknown backend", found=repr(spec.backend),
            allowed=", ".join(sorted(BACKENDS)), fix=did_you_mean(spec.backend, BACKENDS))])
    backend = get_backend(spec.backend)
    references = check_references(spec, backend.settings_model)
    problems = [*deferred, *_name_problems(spec), *references, *stop_problems(spec, backend),
                *search_problems(spec, backend), *seeds_problems(spec, backend, data.get("seeds"))]
    return SpecReading(
        spec, tuple(problems),
        axes_sound=all(p.location.startswith(("exclude", "include")) for p in references),
        selections_sound=not references)


def _name_problems(spec: Spec) -> list[Problem]:
    """A name that ends as kappa's own sweeps do (``<name>.canary``) would be taken for one
    of them (a canary sweep's end is never posted, its rules never applied)."""
    if (suffix := reserved_suffix(spec.name)) is None:
        return []
    return [spec.problem(["name"], f"names ending in {suffix!r} are reserved for "
                         f"{RESERVED_SUFFIXES[suffix]}", found=repr(spec.name),
                         fix=f"drop the {suffix!r} ending")]


def parse_spec(text: str, filename: str = "<spec>", path: Path | None = None,
               overrides: Sequence[str] = ()) -> Spec:
    """:func:`read_spec`, raising ``UserInputError`` with every problem the spec alone shows
    (:func:`orchestrator.grid.plan.parse_plan` adds the cells' settings problems)."""
    reading = read_spec(text, filename, path, overrides)
    if reading.problems:
        raise UserInputError(f"{filename}: invalid spec", list(reading.problems))
    return reading.spec


def _with_leaf_stand_ins(data: dict[str, Any], exc: ValidationError) -> dict[str, Any]:
    """``data`` with stand-ins for wrong leaf keys (as is if other keys are wrong too)."""
    wrong = {str(err["loc"][0]) if err["loc"] else "" for err in exc.errors()}
    if not wrong <= _LEAF_STAND_INS.keys():
        return data
    stand_ins = {key: _LEAF_STAND_INS[key] for key in wrong if _LEAF_STAND_INS[key] is not None}
    return {**{k: v for k, v in data.items() if k not in wrong}, **stand_ins}


def load_spec(path: str | Path, overrides: Sequence[str] = ()) -> Spec:
    """Read (at most ``MAX_FILE_BYTES``) and parse the spec file at ``path``, overrides applied."""
    file = Path(path)
    return parse_spec(read_yaml_file(file, "spec"), str(file), file, overrides)
