"""What table to build: a strict, frozen description, and how the CLI's options fill it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orchestrator.backends.validation import problems_from_validation_error
from orchestrator.errors import Problem, UserInputError

Scale = Literal["auto", "points", "raw"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeltaSpec(_Strict):
    """``axis=base``: rows at ``base`` are absolute; every other value gets a delta row."""

    axis: str
    base: str

    @classmethod
    def parse(cls, text: str) -> DeltaSpec:
        """From the CLI form ``reward_budget=false``."""
        axis, sep, base = text.partition("=")
        if not sep or not axis.strip() or not base.strip():
            raise ValueError(f"expected AXIS=BASE_VALUE, found {text!r}")
        return cls(axis=axis.strip(), base=base.strip())


class TableSpec(_Strict):
    """One ablation table over a results frame.

    * ``rows``: axes whose values label the rows (``baseline``).
    * ``delta``: the axis compared within each row and its base value; the other values
      become signed delta rows (``+ RB``), paired across seeds.
    * ``cross``: instead of rows/delta, every combination of these axes as an absolute row
      (the KL ✓/✗ × RB ✓/✗ crossing table).
    * ``blocks``: one block per value of this axis (``model``).
    * ``metrics``: comma-separated globs over final-metric names; the ``*`` parts become
      the column headers; an ``Average`` column is appended. ``None``: the evaluation's
      ``eval/*/mean@k`` (whatever k the runs logged), else ``val-core/*/acc/mean@1``.
    * ``where``: ``axis -> value`` filters applied first.
    * ``seed_axis``: the axis whose values are replicates (mean, CI, pairing).
    * ``strict``: refuse rather than mark (``‡``) numbers whose runs differ in numerics.
    """

    rows: tuple[str, ...] = ("baseline",)
    delta: DeltaSpec | None = None
    cross: tuple[str, ...] | None = None
    blocks: str | None = None
    metrics: str | None = None
    where: dict[str, str] = Field(default_factory=dict)
    seed_axis: str = "seed"
    scale: Scale = "auto"
    confidence: float = Field(0.95, gt=0.0, lt=1.0)
    show_ci: bool = True
    average: bool = True
    higher_is_better: bool = True
    digits: int = Field(2, ge=0, le=6)
    #: Refuse (exit 2) a table whose rows or deltas pool runs of different numerics.
    strict: bool = False

    @model_validator(mode="after")
    def _cross_or_rows(self) -> TableSpec:
        if self.cross is not None and self.delta is not None:
            raise ValueError("a crossing table shows absolute scores: use --cross or --delta, "
                             "not both")
        if self.cross is not None and not self.cross:
            raise ValueError("--cross needs at least one axis")
        return self

    @property
    def label_axes(self) -> tuple[str, ...]:
        """The axes that label rows (the crossed axes for a crossing table)."""
        return self.cross if self.cross is not None else self.rows

    @property
    def metric_globs(self) -> tuple[str, ...]:
        """The metric globs, split on commas (none: the frame's default, see
        :func:`~orchestrator.analysis.tables.labels.default_metric_glob`)."""
        return tuple(g.strip() for g in (self.metrics or "").split(",") if g.strip())


def options_spec(rows: str | None, delta: str | None, cross: str | None,
                 where: Sequence[str], **fields: Any) -> TableSpec:
    """The spec ``kappa table``'s options describe: ``rows`` and ``cross`` comma-separated
    axes ('' for none), ``delta`` ``AXIS=BASE``, each ``where`` ``AXIS=VALUE``, the other
    ``fields`` as they are (``None``: the default). Every problem a ``UserInputError``."""
    try:
        delta_spec = DeltaSpec.parse(delta) if delta else None
    except ValueError as exc:
        raise UserInputError("invalid --delta", [Problem(
            "--delta", str(exc), fix="e.g. --delta reward_budget=false")]) from None
    pairs = [item.partition("=") for item in where]
    bad = [item for item, (axis, sep, _) in zip(where, pairs, strict=True)
           if not sep or not axis.strip()]
    if bad:
        raise UserInputError("invalid --where", [
            Problem("--where", "expected AXIS=VALUE", found=item) for item in bad])
    given = {"rows": _axes(rows), "delta": delta_spec, "cross": _axes(cross),
             "where": {axis.strip(): value.strip() for axis, _, value in pairs}, **fields}
    try:
        return TableSpec(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        raise UserInputError("invalid table options", problems_from_validation_error(exc)) from None


def _axes(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(p.strip() for p in text.split(",") if p.strip())
