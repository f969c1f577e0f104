"""Cross-reference checks, given the backend: do axes, labels, zips, exclusions and includes fit
together, and do the ``stop:`` and ``search:`` blocks (:mod:`.stop_block`, :mod:`.search_block`)
fit the rest of the spec? Every problem is collected, located."""

from __future__ import annotations

import importlib.util
import logging
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from orchestrator.errors import Problem, UserInputError
from orchestrator.spec.model import Spec, scalar_key
from orchestrator.spec.search_block import Distribution, with_values
from orchestrator.spec.settings_paths import (
    LeafIndex,
    LeafPath,
    did_you_mean,
    flatten,
    settings_paths,
    written_leaves,
)
from orchestrator.spec.yaml_source import dotted

if TYPE_CHECKING:
    from orchestrator.backends import Backend

LOG = logging.getLogger(__name__)


def _show(values: list[Any], limit: int = 12) -> str:
    shown = ", ".join(repr(v) for v in values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def axis_leaf_paths(spec: Spec, axis: str) -> set[LeafPath]:
    """The setting leaf paths an axis sets (empty for labels)."""
    values = spec.axes[axis]
    if isinstance(values, dict):
        return {leaf for settings in values.values() for leaf in flatten(settings)}
    if axis in spec.labels:
        return set()
    return {tuple(axis.split("."))}


def _check_axes(spec: Spec, known: frozenset[str], problems: list[Problem]) -> None:
    # Each label's first position (later ones are repetitions).
    label_at = {label: index for index, label in reversed(list(enumerate(spec.labels)))}
    for axis, values in spec.axes.items():
        if isinstance(values, dict):
            if axis in label_at:
                problems.append(spec.problem(
                    ("labels", label_at[axis]), "an axis of named variants needs no label",
                    found=repr(axis), fix=f"remove '{axis}' from labels"))
            continue
        if axis in known and axis in label_at:
            problems.append(spec.problem(
                ("labels", label_at[axis]),
                f"'{axis}' is a {spec.backend} setting, so its axis sets it; it cannot be a label",
                found=repr(axis), fix=f"remove '{axis}' from labels, or rename the axis"))
        elif axis not in known and axis not in label_at:
            close = did_you_mean(axis, known)
            problems.append(spec.problem(
                ("axes", axis),
                f"unknown axis: not a setting of the {spec.backend} backend nor a declared label",
                found=repr(axis),
                allowed=f"a setting of the {spec.backend} backend (see `kappa schema`), or a "
                        "name listed under labels",
                fix=(f"{close} " if close else "")
                    + f"If it only names cells, add it to labels: [{axis}]"))
    for index, label in enumerate(spec.labels):
        if label_at[label] != index:
            problems.append(spec.problem(("labels", index), "label listed twice",
                                         found=repr(label), fix="remove the repetition"))
        elif label not in spec.axes:
            problems.append(spec.problem(
                ("labels", index), "label names no axis", found=repr(label),
                allowed=", ".join(spec.axes) or "(no axes)",
                fix=did_you_mean(label, spec.axes) or "remove it, or add the axis"))


def _spelling(keys: tuple[str, ...]) -> str:
    """``("model", "d_model")`` -> ``model: {d_model}``, as the keys are written."""
    text = keys[-1]
    for key in reversed(keys[:-1]):
        text = f"{key}: {{{text}}}"
    return text


def _check_repeated_settings(spec: Spec, problems: list[Problem]) -> None:
    """A setting written twice (dotted and nested) in base or a variant: YAML keeps one silently."""
    blocks: list[tuple[tuple[str | int, ...], dict[str, Any]]] = [(("base",), spec.base)]
    for axis, values in spec.axes.items():
        if isinstance(values, dict):
            blocks += [(("axes", axis, name), settings) for name, settings in values.items()]
    for where, settings in blocks:
        positions: LeafIndex[int] = LeafIndex()  # the earlier leaves' positions
        leaves = written_leaves(settings)
        for j, (leaf, keys, _) in enumerate(leaves):
            if candidates := positions.overlapping(leaf):
                earlier, earlier_keys, _ = leaves[min(candidates)]
                problems.append(spec.problem(
                    (*where, *keys), f"'{'.'.join(earlier)}' is set twice in {dotted(where)}",
                    found=f"{_spelling(earlier_keys)} and {_spelling(keys)}",
                    fix="keep one of the two (nested and dotted keys are the same setting)"))
            positions.add(leaf, j)


def _check_conflicts(spec: Spec, problems: list[Problem]) -> None:
    earlier: LeafIndex[tuple[int, LeafPath]] = LeafIndex()  # the earlier axes' (axis, leaf)
    names = list(spec.axes)
    clashes: dict[tuple[int, int], set[str]] = {}  # (earlier, later axis) -> what both set
    for i, second in enumerate(names):
        leaves = axis_leaf_paths(spec, second)
        for leaf in leaves:
            for j, theirs in earlier.overlapping(leaf):
                clashes.setdefault((j, i), set()).add(".".join(theirs))
        for leaf in leaves:
            earlier.add(leaf, (i, leaf))
    problems += [spec.problem(
        ("axes", names[i]), f"axes '{names[j]}' and '{names[i]}' both set "
        f"{', '.join(sorted(both))}", found=f"'{names[i]}'",
        fix="set each setting from one axis only (bundle them as variants)")
        for (j, i), both in sorted(clashes.items())]


def _check_zip(spec: Spec, problems: list[Problem]) -> None:
    seen: dict[str, int] = {}
    for g, group in enumerate(spec.zip):
        lengths = {}
        for m, axis in enumerate(group):
            if axis not in spec.axes:
                problems.append(spec.problem(
                    ("zip", g, m), "zip names no axis", found=repr(axis),
                    allowed=", ".join(spec.axes) or "(no axes)",
                    fix=did_you_mean(axis, spec.axes)))
                continue
            if axis in seen:
                problems.append(spec.problem(
                    ("zip", g, m), f"axis already zipped in zip[{seen[axis]}]",
                    found=repr(axis), fix="put all axes that vary together in one group"))
            seen[axis] = g
            lengths[axis] = len(spec.axes[axis])
        if len(set(lengths.values())) > 1:
            problems.append(spec.problem(
                ("zip", g), "zipped axes must have equal lengths",
                found=", ".join(f"{a}: {n}" for a, n in lengths.items()),
                fix="give every axis in the group the same number of values"))


def _check_assignments(spec: Spec, problems: list[Problem]) -> None:
    allowed_keys: dict[str, set[Any]] = {}
    for section in ("exclude", "include"):
        entries = getattr(spec, section)
        for e, entry in enumerate(entries):
            for axis, value in entry.items():
                path = (section, e, axis)
                if axis not in spec.axes:
                    problems.append(spec.problem(
                        path, f"{section} names an unknown axis", found=repr(axis),
                        allowed=", ".join(spec.axes) or "(no axes)",
                        fix=did_you_mean(axis, spec.axes)))
                    continue
                allowed = list(spec.axes[axis])  # a variant axis's names, a list axis's values
                is_variant = isinstance(spec.axes[axis], dict)
                # An include may bring a new value to a list axis (seed 7); anything
                # else outside the axis can match no cell.
                if axis not in allowed_keys:
                    allowed_keys[axis] = {scalar_key(a) for a in allowed}
                if (is_variant or section == "exclude") and (
                        scalar_key(value) not in allowed_keys[axis]):
                    kind = "variant" if is_variant else "value"
                    tail = ", so this exclusion matches no cell" if section == "exclude" else ""
                    problems.append(spec.problem(
                        path, f"not a {kind} of axis '{axis}'{tail}", found=repr(value),
                        allowed=_show(allowed),
                        fix=did_you_mean(str(value), [str(a) for a in allowed])
                            if isinstance(value, str) else None))
            if section == "include" and (missing := [a for a in spec.axes if a not in entry]):
                problems.append(spec.problem(
                    (section, e), "an include is a full assignment: every axis needs a value",
                    found=f"missing {', '.join(missing)}", allowed=", ".join(spec.axes),
                    fix=f"add {', '.join(missing)}"))


def check_references(spec: Spec, settings_model: type[BaseModel]) -> list[Problem]:
    """Every cross-reference problem in ``spec`` given the backend's settings model."""
    problems: list[Problem] = []
    known = settings_paths(settings_model)
    _check_axes(spec, known, problems)
    _check_repeated_settings(spec, problems)
    _check_conflicts(spec, problems)
    _check_zip(spec, problems)
    _check_assignments(spec, problems)
    return problems


def stop_problems(spec: Spec, backend: Backend) -> list[Problem]:
    """What the ``stop:`` block gets wrong with the rest of the spec (located problems):
    each rule watches a metric the backend logs (:func:`_metric_problems`), ``together``
    names axes of this spec and has a rule to stop on; a cap has GPUs to count."""
    stop = spec.stop
    if stop is None:
        return []
    known = [*spec.axes, *spec.labels]
    problems = _metric_problems(spec, backend) + [spec.problem(
        ["stop", "together", n], f"{name!r} is not an axis of this spec", found=name,
        allowed=", ".join(known) or "(the spec has no axes)",
        fix="name the axes whose values the results compare (e.g. [reward_budget])")
        for n, name in enumerate(stop.together) if name not in known]
    if len(set(stop.together)) != len(stop.together):
        problems.append(spec.problem(["stop", "together"], "an axis is named twice",
                                     found=", ".join(stop.together),
                                     fix="name each axis once"))
    if stop.together and not stop.group_metrics():
        problems.append(spec.problem(
            ["stop", "together"], "together: needs a plateau or threshold rule to stop on",
            found="no plateau: or threshold: in stop:",
            fix="add a plateau: or threshold: rule, or remove together:"))
    if stop.together and spec.search is not None:
        problems.append(spec.problem(
            ["stop", "together"], "comparison groups cannot be used with search:",
            found="search: and stop.together", fix="remove together: (trials stop alone)"))
    if stop.gpu_hours is not None and spec.resources.gpu_hours <= 0:
        problems.append(spec.problem(
            ["stop", "gpu_hours"], "a GPU-hours cap needs cells that use GPUs",
            found=f"gpu_hours: {stop.gpu_hours:g} with resources.gpus: {spec.resources.gpus}",
            fix="set resources: {gpus: N, hours: H} (what one cell needs), or remove gpu_hours"))
    return problems


def _metric_problems(spec: Spec, backend: Backend) -> list[Problem]:
    """A rule's metric that the backend never logs is refused, with the names it logs (a
    misspelt metric would never fire); a backend that cannot know gets a warning."""
    assert spec.stop is not None
    stop = spec.stop
    rules = [(("stop", "plateau"), stop.plateau), (("stop", "threshold"), stop.threshold),
             *((("stop", "diverged", i), rule) for i, rule in enumerate(stop.diverged))]
    watched = [(where, rule.metric) for where, rule in rules if rule is not None]
    known = backend.known_metrics() if watched else None
    if known is None:
        if watched:
            LOG.warning("warning: the %s backend cannot list the metrics it logs (a plug-in "
                        "may add its own), so the stop rules' %s are not checked; the "
                        "scheduler warns when a cell ends without logging one", backend.name,
                        ", ".join(sorted({metric for _, metric in watched})))
        return []
    logged = ", ".join(sorted(known)) + " (* is any name)"
    return [spec.problem(
        (*where, "metric"), f"the {backend.name} backend never logs this metric, so the "
        "rule would never fire", found=metric, allowed=logged,
        fix=did_you_mean(metric, known) or "watch a metric the backend logs")
        for where, metric in watched if not any(fnmatchcase(metric, p) for p in known)]


def search_problems(spec: Spec, backend: Backend) -> list[Problem]:
    """What the ``search:`` block gets wrong with the backend and the axes (located); the
    range's corners are validated, then preflighted as one batch."""
    search = spec.search
    if search is None:
        return []
    problems: list[Problem] = []
    if search.sampler == "cmaes" and importlib.util.find_spec("cmaes") is None:
        problems.append(spec.problem(
            ["search", "sampler"], "the cmaes sampler needs the cmaes package",
            found="cmaes", fix="pip install cmaes, or use sampler: tpe"))
    known = settings_paths(backend.settings_model)
    checkable: dict[str, Distribution] = {}
    for name, dist in search.space.items():
        where = ["search", "space", name]
        if name not in known:
            problems.append(spec.problem(
                where, f"the {backend.name} backend has no setting {name!r}", found=name,
                fix=did_you_mean(name, known) or "search a setting the backend has"))
        elif name in spec.axes or name in spec.labels:
            problems.append(spec.problem(
                where, "a setting cannot be both an axis and searched", found=name,
                fix=f"remove {name} from axes: or from search.space"))
        else:
            checkable[name] = dist
    corners: list[tuple[str, Any, BaseModel]] = []
    for name, dist in checkable.items():
        for value in dist.corners():
            try:
                corners.append((name, value, backend.validate(with_values(spec.base,
                                                                          {name: value}))))
            except UserInputError as exc:
                problems += _rejected(spec, name, value, exc)
                break
    try:
        backend.preflight({str(n): model for n, (_, _, model) in enumerate(corners)})
    except UserInputError:
        # The batch failed: ask corner by corner (answers are cached) to place each one.
        rejected: set[str] = set()
        for name, value, model in corners:
            if name in rejected:
                continue
            try:
                backend.preflight({"": model})
            except UserInputError as exc:
                problems += _rejected(spec, name, value, exc)
                rejected.add(name)
    return problems


def _rejected(spec: Spec, name: str, value: Any, exc: UserInputError) -> list[Problem]:
    """The problem of a searched value the backend rejects, at ``search.space.<name>``."""
    own = [p for p in exc.problems if p.location.split(".")[0] in
           (name.split(".")[0], "")] or exc.problems[:1]
    return [spec.problem(["search", "space", name],
                         f"the backend rejects {name}={value!r}: {p.message}",
                         found=repr(value), allowed=p.allowed, fix=p.fix) for p in own[:1]]
