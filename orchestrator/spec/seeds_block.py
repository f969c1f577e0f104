"""The spec's ``seeds:`` block (docs/spec.md#seeds-on-demand): instead of a fixed ``seed``
axis, each comparison of ``compare``'s axis against its base value gets ``start`` seeds,
then one more at a time while the sequential rule (:mod:`orchestrator.stopping.seeds`)
leaves it undecided, up to ``max``. Checked, and turned into a seed axis, by
:mod:`.seeds_axis`; the scheduler adds the seeds: :mod:`orchestrator.sweeps.seed_hook`."""

from __future__ import annotations

from itertools import pairwise
from typing import Annotated, Literal

from pydantic import Field, StrictFloat, StrictInt, field_validator

from orchestrator.limits import MAX_SEED
from orchestrator.spec.search_block import JsonScalar
from orchestrator.spec.stop_block import AxisRef, Block, MetricName

SEED_AXIS = "seed"
"""The axis (and backend setting) the block sets; a spec with the block has none of its own."""
MAX_SEEDS = 1000
"""Seeds one comparison may get (the grid's cell limit bounds the sweep as a whole)."""

Seed = Annotated[int, Field(strict=True, ge=0, le=MAX_SEED)]
#: The α-spending functions :mod:`orchestrator.stopping.seeds` implements.
Spending = Literal["obrien-fleming", "pocock"]


class SeedsSpec(Block):
    """The ``seeds:`` block (see the module docstring)."""

    compare: dict[AxisRef, JsonScalar] = Field(
        min_length=1, max_length=1,
        description="The compared axis and its base value, e.g. {reward_budget: false}: every "
                    "other value is compared with it, paired by seed, within each combination "
                    "of the other axes (a row).")
    start: StrictInt = Field(3, ge=2, le=MAX_SEEDS,
                             description="Seeds every comparison gets before its first look.")
    max: StrictInt = Field(8, ge=2, le=MAX_SEEDS,
                           description="Seeds a comparison gets at most (the fixed design's).")
    metric: MetricName | None = Field(
        None, description="Glob of the final metrics compared (their mean per cell). Default: "
                          "the table's eval/*/mean@k, its Average column.")
    margin: StrictFloat | StrictInt = Field(
        0.0, ge=0, description="A difference smaller than this, in the metric's units as the "
                               "table shows them (points for accuracies), is 'within margin'. "
                               "0: never.")
    alpha: StrictFloat = Field(0.05, gt=0, lt=1, description=(
        "Chance, over all looks, of calling a zero difference positive or negative."))
    spending: Spending = Field("obrien-fleming", description=(
        "How alpha is spent over the looks: obrien-fleming (little early) or pocock."))
    values: tuple[Seed, ...] | None = Field(
        None, max_length=MAX_SEEDS,
        description="The seeds, ascending, in the order they are added (default 0, 1, 2, ...); "
                    "at least max of them, the first max used.")

    @field_validator("values")
    @classmethod
    def _ascending(cls, values: tuple[int, ...] | None) -> tuple[int, ...] | None:
        # Ascending, as seed-check replays them: the order added is the order looked at.
        if values is not None and any(a >= b for a, b in pairwise(values)):
            raise ValueError("seeds must be listed in ascending order, each once")
        return values

    @property
    def axis(self) -> str:
        """The compared axis."""
        return next(iter(self.compare))

    @property
    def base(self) -> JsonScalar:
        """The compared axis's base value."""
        return self.compare[self.axis]

    def seed_values(self) -> tuple[int, ...]:
        """The ``max`` seeds in the order they are added (the first ``start`` in the grid)."""
        return self.values[:self.max] if self.values is not None else tuple(range(self.max))
