"""``kappa seed-check``: the seed rule (:mod:`orchestrator.stopping.seeds`) replayed on a
finished sweep that ran every seed, to see what seeds on demand would have spent and decided,
or on one that ran seeds on demand (``seeds:``), to check its decisions: a comparison is
replayed when it has ``max`` paired seeds or fewer that decide it. The pairing here is the
one the live rule uses (:mod:`.seed_live`).

For one compared axis (``AXIS=BASE``), cells are paired by seed within each comparison row
(the cells equal in every other axis). Seeds are taken in ascending order, as a sweep adds
them; each comparison's paired differences go through the rule, which gives its decision,
the interval it was decided with and the seeds it used. A row's seed is needed while any of
its comparisons wants it, so the hours used are those of the cells of each row's needed
seeds; the fixed design runs every seed up to the rule's ``max`` (a seed a live sweep never
ran is counted at the mean hours of its row's cells of that value). Each decision is set
beside the fixed design's own: the 95% paired t-interval over the first ``max`` seeds.
A sequential decision *contradicts* the fixed analysis when one says positive and the
other negative, or the sequential rule calls a difference within its margin that the
fixed interval puts outside it.

With stopping rules (``--rules``), each cell's value and hours are those at the step
the comparison-group rules stop it (:mod:`.stop_check`): both savings together.
"""

from __future__ import annotations

import fnmatch
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator import paths
from orchestrator.analysis.combined import value_text
from orchestrator.analysis.stats import Interval, t_interval
from orchestrator.analysis.tables.labels import default_metric_glob
from orchestrator.errors import Problem, UserInputError
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.stopping.replay import Replayed
from orchestrator.stopping.seeds import SPENDING as SPENDING  # kappa seed-check's choices
from orchestrator.stopping.seeds import Look, SeedRule, decide


@dataclass(frozen=True)
class SeedCell:
    """One finished cell as the replay needs it: its value of the metric (``None``: none)
    and the hours it ran (or would have run, stopped)."""

    cell_id: str
    axes: dict[str, Any]
    value: float | None
    hours: float


@dataclass(frozen=True)
class SeedComparison:
    """One comparison: the rule's look that decided it (or its last), and the fixed design's
    interval and decision over the first ``max`` seeds."""

    row: str
    value: str
    look: Look
    fixed: Interval

    @property
    def fixed_decision(self) -> str:
        """``positive`` / ``negative`` by the fixed 95% interval, else ``undecided``."""
        if self.fixed.low is not None and self.fixed.low > 0:
            return "positive"
        if self.fixed.high is not None and self.fixed.high < 0:
            return "negative"
        return "undecided"

    def contradicts(self, margin: float) -> bool:
        """Whether the rule's decision contradicts the fixed analysis (module docstring)."""
        mine, fixed = self.look.decision, self.fixed_decision
        if {mine, fixed} == {"positive", "negative"}:
            return True
        low, high = self.fixed.low, self.fixed.high
        outside = low is not None and high is not None and (low >= margin or high <= -margin)
        return mine == "within margin" and outside


@dataclass(frozen=True)
class SeedCheck:
    """The replay's figures for one sweep."""

    rule: SeedRule
    axis: str
    base: str
    comparisons: tuple[SeedComparison, ...]
    hours_fixed: float
    hours_used: float
    cells_fixed: int
    cells_used: int
    #: Comparisons with fewer than ``max`` paired seeds that do not decide them.
    left_out: int = 0

    def as_json(self) -> dict[str, Any]:
        """For ``--json`` and the benchmark."""
        figures = {k: v for k, v in vars(self).items() if k != "comparisons"}
        return {**figures, "rule": vars(self.rule),
                "comparisons": [{"row": c.row, "value": c.value, **vars(c.look),
                                 "fixed_estimate": c.fixed.estimate, "fixed_low": c.fixed.low,
                                 "fixed_high": c.fixed.high, "fixed_n": c.fixed.n,
                                 "fixed_decision": c.fixed_decision,
                                 "contradicts": c.contradicts(self.rule.margin)}
                                for c in self.comparisons]}


def seed_key(seed: Any) -> tuple[int, float | str]:
    """Seeds in the order a sweep adds them: numbers ascending, then the rest by text."""
    return (0, float(seed)) if isinstance(seed, int | float) else (1, str(seed))


Rows = dict[str, dict[str, dict[Any, SeedCell]]]


def row_name(axes: Mapping[str, Any], axis: str, seed_axis: str) -> str:
    """A cell's comparison row: every axis but ``axis`` and the seed (``baseline=grpo``)."""
    return ", ".join(f"{k}={value_text(v)}" for k, v in sorted(axes.items())
                     if k not in (axis, seed_axis))


def rows_of(cells: Iterable[SeedCell], axis: str, seed_axis: str = "seed") -> Rows:
    """The cells by comparison row (:func:`row_name`), value of ``axis`` (as a spec writes
    it) and seed."""
    table: Rows = defaultdict(lambda: defaultdict(dict))
    for cell in cells:
        row = row_name(cell.axes, axis, seed_axis)
        table[row][value_text(cell.axes.get(axis))][cell.axes.get(seed_axis)] = cell
    return table


def paired_diffs(treated: Mapping[Any, SeedCell], bases: Mapping[Any, SeedCell],
                 top: int) -> list[float]:
    """Treatment − base of the first ``top`` seeds, ascending, where both have a value."""
    seeds = sorted((s for s in treated if s in bases and _usable(treated[s], bases[s])),
                   key=seed_key)[:top]
    return [float(treated[s].value) - float(bases[s].value)  # type: ignore[arg-type]
            for s in seeds]


def seed_check(cells: Sequence[SeedCell], rule: SeedRule, axis: str, base: str,
               seed_axis: str = "seed") -> SeedCheck:
    """The figures of one replay (module docstring); ``UserInputError`` for an axis or base
    value the cells do not have, or when no comparison has the seeds to replay."""
    _check_delta(cells, axis, base)
    table = rows_of(cells, axis, seed_axis)
    out: list[SeedComparison] = []
    needed: dict[str, int] = {}  # row -> seeds its comparisons need
    left_out = 0
    for row, by_value in sorted(table.items()):
        bases = by_value.get(base, {})
        for value, treated in sorted(by_value.items()):
            if value == base:
                continue
            diffs = paired_diffs(treated, bases, rule.max)
            looked = decide(diffs, rule)
            if looked is None or looked.decision == "undecided":
                left_out += 1  # fewer seeds than its decision needs
                continue
            out.append(SeedComparison(row, value, looked, t_interval(diffs)))
            needed[row] = max(needed.get(row, 0), looked.n)
    if not out:
        raise UserInputError("nothing to replay", [Problem(
            "--max", f"no comparison of {axis} against {base} has {rule.max} paired seeds, "
                     "nor fewer that decide it",
            fix="replay a sweep that ran at least --max seeds of every compared cell, or "
                "lower --max")])
    hours_fixed = hours_used = 0.0
    cells_fixed = cells_used = 0
    for row, n in needed.items():
        for by_seed in table[row].values():
            ran = [c for _, c in sorted(by_seed.items(), key=lambda x: seed_key(x[0]))]
            # A seed a live sweep never ran counts at the mean hours of those it ran.
            hours_fixed += (sum(c.hours for c in ran[:rule.max])
                            + sum(c.hours for c in ran) / len(ran) * max(0, rule.max - len(ran)))
            hours_used += sum(c.hours for c in ran[:n])
            cells_fixed += rule.max
            cells_used += len(ran[:n])
    return SeedCheck(rule, axis, base, tuple(out), hours_fixed, hours_used, cells_fixed,
                     cells_used, left_out)


def _check_delta(cells: Sequence[SeedCell], axis: str, base: str) -> None:
    axes = list(dict.fromkeys(a for c in cells for a in c.axes))
    if axis not in axes:
        raise UserInputError("--delta names an axis the sweep does not have", [Problem(
            "--delta", f"{axis!r} is not an axis", allowed=", ".join(axes),
            fix="e.g. --delta reward_budget=false")])
    values = list(dict.fromkeys(value_text(c.axes.get(axis)) for c in cells))
    if base not in values:
        raise UserInputError("--delta names a base value the axis never takes", [Problem(
            "--delta", f"{axis} never takes {base!r}", allowed=", ".join(values),
            fix=f"e.g. --delta {axis}={values[0]}")])


def _usable(*cells: SeedCell) -> bool:
    return all(c.value is not None and math.isfinite(c.value) for c in cells)


def render(result: SeedCheck, scale: float = 1.0) -> str:
    """The report ``kappa seed-check`` prints (markdown); ``scale``: 100 for points."""
    rule = result.rule
    ratio = result.hours_used / result.hours_fixed if result.hours_fixed else 1.0
    contradicted = sum(c.contradicts(rule.margin) for c in result.comparisons)
    lines = [f"Rule: seeds {rule.start}..{rule.max}, alpha {rule.alpha}, {rule.spending} "
             f"spending, margin {rule.margin * scale:g}; compared: {result.axis} vs "
             f"{result.base}, paired by seed (seeds in ascending order)",
             f"cell-hours: {result.hours_used:.3f} of the fixed design's {result.hours_fixed:.3f} "
             f"({ratio:.2f}x); cells: {result.cells_used} of {result.cells_fixed}; "
             f"{contradicted} decision(s) contradict the fixed {rule.max}-seed analysis",
             *([f"{result.left_out} comparison(s) left out: fewer than {rule.max} paired "
                "seeds, and undecided on those"] if result.left_out else []),
             "", "| row | value | seeds used | sequential interval | level | decision | "
             f"fixed {rule.max}-seed 95% CI | fixed decision | contradicts |",
             "|---|---|---:|---|---:|---|---|---|---|"]
    for c in result.comparisons:
        look = c.look
        iv = c.fixed
        fixed = ("—" if iv.low is None or iv.high is None
                 else f"[{iv.low * scale:+.2f}, {iv.high * scale:+.2f}]"
                 + (f" (n={iv.n})" if iv.n < rule.max else ""))
        lines.append(
            f"| {c.row or '—'} | {c.value} | {look.n} | [{look.low * scale:+.2f}, "
            f"{look.high * scale:+.2f}] | {1 - look.level_alpha:.4f} | {look.decision} | "
            f"{fixed} | {c.fixed_decision} | {'YES' if c.contradicts(rule.margin) else 'no'} |")
    lines += ["", "The sequential interval is the deciding look's: its level is 1 minus the "
              "alpha that look spends, so it is wider than a fixed-n 95% interval."]
    return "\n".join(lines) + "\n"


def sweep_cells(cells: Sequence[CellRecord], metric: str | None,
                stopped: Mapping[str, Replayed] | None = None) -> tuple[list[SeedCell], str]:
    """The finished cells as the replay reads them, and the metric it compares: each cell's
    mean of the final metrics matching ``metric`` (a glob; default the table's
    ``eval/*/mean@k``, its Average column), its hours from the registry; with ``stopped``
    (the comparison-group replay), the metric's value and the hours at the cell's stop."""
    if stopped is None:
        glob = metric_glob(cells, metric)
        if glob is None:
            raise UserInputError("no metric to compare", [Problem(
                "--metric", "the cells logged no eval/* or val-core/* final metric",
                fix="name one with --metric GLOB")])
    else:
        glob = metric or ""
    out = []
    for cell in cells:
        hours = cell_hours(cell)
        value: float | None = None
        if stopped is None:
            value = cell_value(cell, glob)
        elif cell.state is CellState.SUCCEEDED:
            done = stopped[cell.cell_id]
            value = None if done.failed else done.values.get(glob)
            hours *= ran_share(done)
        out.append(SeedCell(cell.cell_id, dict(cell.axes), value, hours))
    if not any(c.value is not None for c in out):
        raise UserInputError("no cell has the metric", [Problem(
            "--metric", "no finished cell logged a metric matching it", found=glob,
            fix="give a glob that matches a final metric, e.g. 'eval/*/mean@8'")])
    return out, glob


def cell_hours(cell: CellRecord) -> float:
    """The hours ``cell`` ran by the registry's clock (0 when it has no start or end)."""
    return ((cell.finished_at - cell.started_at).total_seconds() / 3600
            if cell.started_at and cell.finished_at else 0.0)


def ran_share(done: Replayed) -> float:
    """The share of its full length a replayed cell runs before its stop (1: no stop)."""
    return done.step / done.full_step if done.step is not None and done.full_step else 1.0


def metric_glob(cells: Iterable[CellRecord], metric: str | None) -> str | None:
    """``metric``, else the table's default over the cells' final metrics (``None``: none)."""
    return metric or default_metric_glob(sorted({k for c in cells for k in c.final_metrics or {}}))


def cell_value(cell: CellRecord, glob: str | None) -> float | None:
    """A succeeded cell's mean of its final metrics matching ``glob`` (``None``: none)."""
    if cell.state is not CellState.SUCCEEDED or glob is None:
        return None
    found = [float(v) for k, v in (cell.final_metrics or {}).items()
             if fnmatch.fnmatchcase(k, glob) and isinstance(v, int | float)]
    return sum(found) / len(found) if found else None


def load_cells(sweep: str, registry_url: str | None = None) -> list[CellRecord]:
    """The sweep's cells (``UserInputError`` for an unknown sweep or registry)."""
    with Registry.open(paths.registry_url(registry_url), create=False) as reg:
        reg.get_sweep(sweep)
        return reg.cells(sweep)


def seed_rule(start: int, top: int, alpha: float, margin: float, spending: str) -> SeedRule:
    """The rule of ``kappa seed-check``'s options; ``UserInputError`` when they make none."""
    try:
        return SeedRule(start, top, alpha, margin, spending)
    except ValueError:
        raise UserInputError("invalid seed rule", [Problem(
            "--start/--max/--alpha/--margin", "need 2 <= start <= max, 0 < alpha < 1 and "
            "margin >= 0", found=f"start={start} max={top} alpha={alpha} margin={margin}",
            fix="e.g. --start 3 --max 8")]) from None


def points_scale(cells: Sequence[SeedCell]) -> float:
    """100 when every value is an accuracy in [0, 1] (shown in points), else 1."""
    values = [c.value for c in cells if c.value is not None]
    return 100.0 if values and all(0.0 <= v <= 1.0 for v in values) else 1.0
