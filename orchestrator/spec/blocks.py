"""The problems the spec's ``stop:`` and ``search:`` blocks (:mod:`.stop_block`,
:mod:`.search_block`) have with the rest of the spec, checked when a spec is loaded."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from orchestrator.errors import Problem, UserInputError
from orchestrator.spec.search_block import Distribution, with_values

if TYPE_CHECKING:
    from orchestrator.backends import Backend
    from orchestrator.spec.model import Spec


def stop_problems(spec: Spec) -> list[Problem]:
    """What the ``stop:`` block gets wrong with the rest of the spec (located problems):
    ``together`` names axes of this spec and has a rule to stop on; a cap has GPUs to count."""
    stop = spec.stop
    if stop is None:
        return []
    known = [*spec.axes, *spec.labels]
    problems = [spec.problem(
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


def search_problems(spec: Spec, backend: Backend) -> list[Problem]:
    """What the ``search:`` block gets wrong with the backend and the axes (located); the
    range's corners are validated, then preflighted as one batch."""
    from orchestrator.spec.settings_paths import did_you_mean, settings_paths

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
