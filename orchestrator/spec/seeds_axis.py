"""The ``seeds:`` block against itself and the rest of the spec (:func:`seeds_problems`),
and the seed axis it stands for (:func:`with_seed_axis`): the grid a submit records holds
the first ``start`` seeds of every cell; the scheduler adds the later ones
(:mod:`orchestrator.sweeps.seed_hook`), each an ordinary cell of that same axis."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.errors import Problem
from orchestrator.spec.model import Spec, scalar_key
from orchestrator.spec.seeds_block import SEED_AXIS, SeedsSpec
from orchestrator.spec.settings_paths import did_you_mean, undot

if TYPE_CHECKING:
    from orchestrator.backends import Backend

_FIX_SEED = "remove it: the seeds: block sets the seed (list them with seeds.values)"


def with_seed_axis(spec: Spec) -> Spec:
    """``spec`` with the block's first ``start`` seeds as its last axis (fastest varying,
    so a row's seeds sit together), each ``include`` entry once per seed; ``spec`` itself
    without a block, or when it has a ``seed`` axis already (refused by
    :func:`seeds_problems`)."""
    seeds = spec.seeds
    if seeds is None or SEED_AXIS in spec.axes:
        return spec
    first = list(seeds.seed_values()[:seeds.start])
    include = tuple({**entry, SEED_AXIS: seed} for entry in spec.include for seed in first)
    return spec.model_copy(update={"axes": {**spec.axes, SEED_AXIS: first},
                                   "include": include})


def seeds_problems(spec: Spec, backend: Backend, raw: Any = None) -> list[Problem]:
    """What the ``seeds:`` block gets wrong with itself and the rest of the spec (located). A
    block whose fields the model refused (``spec.seeds`` is then ``None``) is read from ``raw``,
    as written, so that one run reports its field errors and these (the grid's size at ``max``
    seeds: when the grid is expanded)."""
    seeds = spec.seeds
    written: Mapping[str, Any] = (seeds.model_dump() if seeds is not None
                                  else raw if isinstance(raw, dict) else {})
    if seeds is None and not written:
        return []
    problems = _count_problems(spec, written)
    problems += [spec.problem(path, f"a seed {what} beside the seeds: block", found=SEED_AXIS,
                              fix=_FIX_SEED) for path, what in _own_seeds(spec)]
    compare = written.get("compare")
    if isinstance(compare, dict) and len(compare) == 1 and isinstance(next(iter(compare)), str):
        problems += _compare_problems(spec, *next(iter(compare.items())))
    if spec.search is not None:
        problems.append(spec.problem(["seeds"], "seeds: cannot be used with search:",
                                     found="search: and seeds:", fix="remove one of them"))
    if SEED_AXIS not in backend.settings_model.model_fields:
        problems.append(spec.problem(
            ["seeds"], f"the {backend.name} backend has no {SEED_AXIS!r} setting to vary",
            found=backend.name, fix="use a fixed axis of the setting that seeds your runs"))
    return problems


def _count_problems(spec: Spec, written: Mapping[str, Any]) -> list[Problem]:
    """``start`` no more than ``max``, and ``values`` listing at least ``max`` seeds."""
    fields = SeedsSpec.model_fields
    start = written.get("start", fields["start"].default)
    top = written.get("max", fields["max"].default)
    values = written.get("values")
    if not (type(start) is int and type(top) is int):
        return []  # the model said what is wrong with them
    problems = []
    if start > top:
        problems.append(spec.problem(
            ["seeds", "start"], f"start ({start}) is more than max ({top})",
            found=f"start: {start}, max: {top}", fix="e.g. start: 3, max: 8"))
    if isinstance(values, list | tuple) and len(values) < top:
        problems.append(spec.problem(
            ["seeds", "values"], f"{len(values)} seeds listed, fewer than max ({top})",
            found=str(len(values)), fix=f"list {top} seeds, or lower max"))
    return problems


def _compare_problems(spec: Spec, axis: str, base: Any) -> list[Problem]:
    """The compared axis is one of the spec's, not zipped, and takes the base value."""
    where: list[str | int] = ["seeds", "compare", axis]
    if axis not in spec.axes:
        return [spec.problem(
            where, f"{axis!r} is not an axis of this spec", found=axis,
            allowed=", ".join(spec.axes) or "(the spec has no axes)",
            fix=did_you_mean(axis, spec.axes) or "name the axis the results compare, e.g. "
                                                 "compare: {reward_budget: false}")]
    problems = []
    values = spec.axes[axis]
    taken = list(values) if isinstance(values, dict) else values
    if scalar_key(base) not in {scalar_key(v) for v in taken}:
        problems.append(spec.problem(
            where, f"the base value is not one of {axis}'s values", found=json.dumps(base),
            allowed=", ".join(map(json.dumps, taken))[:300],
            fix=f"compare against one of them, e.g. {{{axis}: {json.dumps(taken[0])}}}"))
    zipped = next((g for g in spec.zip if axis in g), None)
    if zipped is not None:
        problems.append(spec.problem(
            where, f"{axis} is zipped with {', '.join(a for a in zipped if a != axis)}: no two "
                   "cells differ in it alone, so nothing can be compared",
            found=axis, fix=f"take {axis} out of the zip group"))
    return problems


def _own_seeds(spec: Spec) -> list[tuple[list[str | int], str]]:
    """Where the spec sets a seed of its own: ``(path, what)``."""
    found: list[tuple[list[str | int], str]] = []
    if SEED_AXIS in spec.axes:
        found.append((["axes", SEED_AXIS], "axis"))
    if SEED_AXIS in spec.labels:
        found.append((["labels"], "label"))
    if SEED_AXIS in undot(spec.base):
        found.append((["base", SEED_AXIS], "setting in base"))
    for name, values in spec.axes.items():
        if isinstance(values, dict):
            found += [(["axes", name, variant], "in a variant")
                      for variant, settings in values.items() if SEED_AXIS in undot(settings)]
    for key in ("include", "exclude"):
        found += [([key, n, SEED_AXIS], f"in {key}")
                  for n, entry in enumerate(getattr(spec, key)) if SEED_AXIS in entry]
    return found
