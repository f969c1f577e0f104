"""The spec's ``search:`` block (docs/spec.md#search): an Optuna study of ``trials`` trials
per axis combination (:mod:`orchestrator.search.hook`). The space is checked against the
backend by :func:`~.references.search_problems`; the objective's metric only once a trial ends."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, model_validator

from orchestrator.spec.stop_block import Block, MetricName

MAX_TRIALS = 10_000
MAX_PARALLEL = 1024
Number = StrictInt | StrictFloat
# What a categorical value (and an axis value of the spec model, which imports this) may be.
JsonScalar = StrictBool | StrictInt | StrictFloat | StrictStr | None
_KINDS = ("uniform", "loguniform", "integer", "categorical")  # "integer" is written int:


class Distribution(Block):
    """One searched setting: exactly one of ``uniform``, ``loguniform`` (``[low, high]``,
    floats), ``int`` (``[low, high]``, inclusive) or ``categorical`` (the values)."""

    uniform: tuple[Number, Number] | None = None
    loguniform: tuple[Number, Number] | None = None
    integer: tuple[StrictInt, StrictInt] | None = Field(None, alias="int")
    categorical: tuple[JsonScalar, ...] | None = Field(None, max_length=1000)

    @model_validator(mode="after")
    def _one_kind(self) -> Distribution:
        given = [k for k in _KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of uniform: [low, high], loguniform: "
                             "[low, high], int: [low, high] or categorical: [values]"
                             + (f" (found {', '.join(given)})" if given else "")
                             .replace("integer", "int"))
        if self.categorical is not None:
            if not self.categorical:
                raise ValueError("categorical: needs at least one value")
            return self
        low, high = self.bounds
        if low > high:
            raise ValueError(f"low > high: [{low:g}, {high:g}]; write [low, high]")
        if self.loguniform is not None and low <= 0:
            raise ValueError(f"a log range needs low > 0 (found {low:g}); use uniform: for "
                             "ranges that include 0")
        return self

    @property
    def bounds(self) -> tuple[float, float]:
        """``(low, high)`` of a numeric range."""
        pair = self.uniform or self.loguniform or self.integer
        assert pair is not None
        return float(pair[0]), float(pair[1])

    def corners(self) -> list[Any]:
        """Values that exercise the range's edges (to validate through the backend)."""
        if self.categorical is not None:
            return list(self.categorical)
        return list(self.integer if self.integer is not None else self.bounds)

    def grid_values(self, points: int) -> list[Any]:
        """``points`` values spread over the range (every value of a categorical, and of
        an int range that has no more than ``points``), for the grid sampler."""
        if self.categorical is not None:
            return list(self.categorical)
        low, high = self.bounds
        if self.integer is not None:
            if high - low + 1 <= points:
                return list(range(int(low), int(high) + 1))
            return sorted({round(low + (high - low) * i / (points - 1)) for i in range(points)})
        if points == 1 or low == high:
            return [low if points == 1 else (low + high) / 2][:1]
        if self.loguniform is not None:
            a, b = math.log(low), math.log(high)
            return [math.exp(a + (b - a) * i / (points - 1)) for i in range(points)]
        return [low + (high - low) * i / (points - 1) for i in range(points)]


class Objective(Block):
    """What a trial scores: ``metric``'s value at the end of the run (``at: final``) or
    the best value it logged (``at: best``), to ``maximize`` or ``minimize``."""

    metric: MetricName
    direction: Literal["maximize", "minimize"] = "maximize"
    at: Literal["final", "best"] = "final"


class SearchSpec(Block):
    """The ``search:`` block (see the module docstring and docs/spec.md#search)."""

    space: dict[str, Distribution] = Field(min_length=1, max_length=64)
    objective: Objective
    trials: StrictInt = Field(ge=1, le=MAX_TRIALS, description="Trials per study in all.")
    parallel: StrictInt = Field(1, ge=1, le=MAX_PARALLEL,
                                description="Trials of one study running at once.")
    sampler: Literal["tpe", "gp", "cmaes", "random", "qmc", "grid"] = "tpe"
    pruner: Literal["median", "successive_halving", "hyperband", "none"] = "none"
    seed: StrictInt | None = Field(None, ge=0, description="The sampler's random seed.")

    def grid_points(self) -> int:
        """Points per numeric range for the grid sampler: as many as keep the grid within
        ``trials`` (categorical and small int ranges are taken whole)."""
        numeric = [d for d in self.space.values() if d.categorical is None]
        fixed = math.prod(len(d.categorical) for d in self.space.values()
                          if d.categorical is not None)
        if not numeric:
            return 1
        room = max(self.trials / fixed, 1.0)
        return max(2, math.floor(room ** (1 / len(numeric)) + 1e-9))


def with_values(settings: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` (nested mappings; not modified) with each dotted name set to its value."""
    out = copy.deepcopy(dict(settings))
    for name, value in values.items():
        *parents, leaf = name.split(".")
        node = out
        for part in parents:
            child = node.get(part)
            node[part] = child = dict(child) if isinstance(child, Mapping) else {}
            node = child
        node.pop(leaf, None)
        node[leaf] = value
    return out
