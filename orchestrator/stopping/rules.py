"""Stopping rules as pure functions of a run's metric history.

Each rule gives the earliest step at which it fires, or ``None``, from what was logged up
to that step only, so a restarted scheduler judging the history afresh decides the same.
Each fires at a log at or after ``min_steps``:

* ``plateau``: the first paper's convergence rule (Appendix B.3,
  :func:`orchestrator.algorithms.convergence.has_plateaued`) on the history up to the log,
  once it has held at every log for at least ``patience`` steps;
* ``threshold``: a value ``>= at_least`` (or ``<= at_most``);
* ``diverged``: the log completing ``for`` consecutive logs that are non-finite
  (``nonfinite``) or cross ``below`` / ``above`` (NaN crosses no bound).

:func:`first_stop` takes the earliest (on a tie: diverged, threshold, plateau)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from orchestrator.runs.stop_request import StopRequest
from orchestrator.spec.stop_block import DivergedRule, PlateauRule, StopRules, ThresholdRule

Point = tuple[int, float]


@dataclass
class MetricHistory:
    """A run's metrics by name, each ``{step: value}`` (a step logged again — a resumed
    launch redoing it — keeps its latest value). Non-finite values are kept."""

    series: dict[str, dict[int, float]] = field(default_factory=dict)

    def add(self, rows: Iterable[tuple[int, dict[str, float]]],
            only: frozenset[str] | None = None) -> bool:
        """Add logged rows (``only``: keep just these metrics); whether any was kept."""
        changed = False
        for step, values in rows:
            for name, value in values.items():
                if only is None or name in only:
                    self.series.setdefault(name, {})[int(step)] = float(value)
                    changed = True
        return changed

    def points(self, metric: str) -> list[Point]:
        """The metric's ``(step, value)`` logs in step order."""
        return sorted(self.series.get(metric, {}).items())


#: Memo of the plateau test per prefix: (metric, prefix length, its last point); a history
#: rewritten with other values misses it.
PlateauCache = dict[tuple[str, int, int, float], bool]


def _plateau_held(metric: str, points: Sequence[Point], n: int,
                  cache: PlateauCache | None) -> bool:
    from orchestrator.algorithms.convergence import has_plateaued

    step, value = points[n - 1]
    key = (metric, n, step, value)
    if cache is not None and key in cache:
        return cache[key]
    finite = [(s, v) for s, v in points[:n] if math.isfinite(v)]
    held = bool(finite) and math.isfinite(value) and has_plateaued(
        [s for s, _ in finite], [v for _, v in finite])
    if cache is not None:
        cache[key] = held
    return held


def plateau_step(rule: PlateauRule, points: Sequence[Point],
                 cache: PlateauCache | None = None) -> int | None:
    """The step at which ``rule`` fires on ``points`` (sorted by step), or ``None``."""
    since: int | None = None  # the log from which the test has held at every log
    for n in range(1, len(points) + 1):
        step = points[n - 1][0]
        if not _plateau_held(rule.metric, points, n, cache):
            since = None
            continue
        since = step if since is None else since
        if step >= rule.min_steps and step - since >= rule.patience:
            return step
    return None


def threshold_step(rule: ThresholdRule, points: Sequence[Point]) -> int | None:
    """The first step at which the metric reached the target, or ``None``."""
    for step, value in points:
        if step < rule.min_steps or not math.isfinite(value):
            continue
        if (rule.at_least is not None and value >= rule.at_least) or (
                rule.at_most is not None and value <= rule.at_most):
            return step
    return None


def crosses(rule: DivergedRule, value: float) -> bool:
    """Whether one logged value counts towards divergence under ``rule``."""
    if rule.nonfinite:
        return not math.isfinite(value)
    if rule.below is not None:
        return value < rule.below
    return rule.above is not None and value > rule.above


def diverged_step(rule: DivergedRule, points: Sequence[Point]) -> int | None:
    """The step completing ``rule.consecutive`` crossing logs in a row, or ``None``."""
    run = 0
    for step, value in points:
        if step < rule.min_steps:
            continue
        run = run + 1 if crosses(rule, value) else 0
        if run >= rule.consecutive:
            return step
    return None


def _value_at(points: Sequence[Point], step: int) -> float:
    return dict(points).get(step, math.nan)


def first_stop(rules: StopRules, history: MetricHistory,
               cache: PlateauCache | None = None) -> StopRequest | None:
    """The earliest rule that fires on ``history``, as a stop request; ``None`` if none."""
    found: list[StopRequest] = []  # in the order that breaks a tie
    for rule in rules.diverged:
        points = history.points(rule.metric)
        if (step := diverged_step(rule, points)) is not None:
            detail = f"{rule.describe()}; last {_value_at(points, step):.4g}"
            found.append(StopRequest("diverged", step, f"diverged at step {step} ({detail})",
                                     "failed"))
    if (t := rules.threshold) is not None:
        points = history.points(t.metric)
        if (step := threshold_step(t, points)) is not None:
            target = f">= {t.at_least:g}" if t.at_least is not None else f"<= {t.at_most:g}"
            detail = f"{t.metric} = {_value_at(points, step):.4g} {target}"
            found.append(StopRequest("threshold", step, f"threshold at step {step} ({detail})"))
    if (p := rules.plateau) is not None and (
            step := plateau_step(p, history.points(p.metric), cache)) is not None:
        found.append(StopRequest("plateau", step, f"plateau at step {step} ({p.metric})"))
    return min(found, key=lambda request: request.step, default=None)


def pruned(step: int, by: str = "pruner") -> StopRequest:
    """A stop request for a trial a pruner (e.g. Optuna's) stopped: a finished result."""
    return StopRequest("pruned", step, f"pruned at step {step} ({by})")
