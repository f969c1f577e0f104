"""The spec's ``stop:`` block (docs/spec.md#stopping-rules): rules judged on the metrics a
run logs (:mod:`orchestrator.stopping.rules`), and the sweep's GPU-hours cap. A metric the
backend never logs is refused where it says what it logs (``Backend.known_metrics``); else
the scheduler warns when a cell ended without logging it."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from orchestrator.limits import MAX_HOURS

MetricName = Annotated[str, Field(min_length=1, max_length=250, pattern=r"^\S+$", strict=True)]
Bound = Annotated[float | None, Field(strict=True)]
Steps = Annotated[int, Field(strict=True, le=10_000_000)]
# An axis name: ASCII letters, digits and _, not starting with a digit; dots for nested settings.
AXIS_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
AxisRef = Annotated[str, Field(pattern=AXIS_PATTERN, strict=True)]


class Block(BaseModel):
    """A spec block's model: unknown keys refused, frozen, no infinities or NaN. Field by field
    strict (no "1" for 1, no true for 1), so that lists still become tuples."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False,
                              populate_by_name=True)


class PlateauRule(Block):
    """Stop a cell whose metric has converged (first paper, Appendix B.3), once the
    convergence test has held for ``patience`` steps and the run is ``min_steps`` in."""

    metric: MetricName = Field(description="The curve to watch (usually validation accuracy).")
    min_steps: Steps = Field(0, ge=0, description="Never stop before this training step.")
    patience: Steps = Field(1, ge=1,
                            description="Steps the plateau must have held before stopping.")


class ThresholdRule(Block):
    """Stop a cell whose metric reached a target: ``at_least`` (higher is better) or
    ``at_most`` (lower is better)."""

    metric: MetricName
    at_least: Bound = Field(None, description="Stop once the metric is >= this.")
    at_most: Bound = Field(None, description="Stop once the metric is <= this.")
    min_steps: Steps = Field(0, ge=0, description="Never stop before this training step.")

    @model_validator(mode="after")
    def _one_target(self) -> ThresholdRule:
        if (self.at_least is None) == (self.at_most is None):
            raise ValueError("give exactly one of at_least (higher is better) or at_most "
                             "(lower is better)")
        return self


class DivergedRule(Block):
    """Fail a cell whose metric is non-finite (``nonfinite: true``) or crosses a bound
    (``below`` / ``above``) at ``for`` consecutive logs of that metric."""

    metric: MetricName
    below: Bound = Field(None, description="Diverged when the metric is < this.")
    above: Bound = Field(None, description="Diverged when the metric is > this.")
    nonfinite: StrictBool | None = Field(
        None, description="true: diverged when the metric is NaN or infinite.")
    consecutive: Steps = Field(1, ge=1, alias="for",
                               description="Consecutive logs of the metric that must cross.")
    min_steps: Steps = Field(0, ge=0, description="Logs before this training step are not judged.")

    @model_validator(mode="after")
    def _one_condition(self) -> DivergedRule:
        given = [name for name in ("below", "above", "nonfinite")
                 if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of below, above or nonfinite: true"
                             + (f" (found {', '.join(given)})" if given else ""))
        if self.nonfinite is False:
            raise ValueError("nonfinite: false judges nothing; use nonfinite: true or "
                             "remove the rule")
        return self

    def describe(self) -> str:
        """``actor/entropy below 0.01 for 5 logs`` (for reasons and status)."""
        if self.nonfinite:
            what = "non-finite"
        elif self.below is not None:
            what = f"below {self.below:g}"
        else:
            what = f"above {self.above:g}"
        times = f" for {self.consecutive} logs" if self.consecutive > 1 else ""
        return f"{self.metric} {what}{times}"


class StopRules(Block):
    """The ``stop:`` block (see the module docstring and docs/spec.md#stopping-rules)."""

    plateau: PlateauRule | None = None
    threshold: ThresholdRule | None = None
    diverged: tuple[DivergedRule, ...] = Field((), max_length=64)
    together: tuple[AxisRef, ...] = Field(
        (), max_length=64,
        description="Axes the results compare (e.g. [reward_budget]): cells that differ only "
                    "in them form a comparison group, which stops as one, at one step "
                    "(docs/spec.md#comparison-groups). Empty: every cell stops on its own.")
    gpu_hours: Bound = Field(
        None, gt=0, le=MAX_HOURS * 1_000_000,
        description="The sweep's cap: a cell starts only while the GPU-hours used, the "
                    "running cells' projection and its own planned hours stay within it.")

    @property
    def has_rules(self) -> bool:
        """Whether any rule watches metrics (the cap alone does not)."""
        return bool(self.plateau or self.threshold or self.diverged)

    @property
    def grouped(self) -> bool:
        """Whether cells stop in comparison groups (``together`` names axes)."""
        return bool(self.together)

    def group_metrics(self) -> frozenset[str]:
        """The metrics of the rules a group stops on together (plateau, threshold)."""
        return frozenset(r.metric for r in (self.plateau, self.threshold) if r is not None)

    def metrics(self) -> frozenset[str]:
        """Every metric a rule reads."""
        rules = (self.plateau, self.threshold, *self.diverged)
        return frozenset(r.metric for r in rules if r is not None)
