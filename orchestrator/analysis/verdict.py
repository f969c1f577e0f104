"""The verdict docs/findings.md's rule gives a table's pooled ``+ RB`` delta: the line
``kappa demo`` ends with.

Finding 1's rule, fixed before its runs: each delta row (a baseline's ``+ RB``) is a fixed
group and its seeds the replicates; the estimate is the mean over baselines of the paired
differences of the Average column, its interval Student t with the variance pooled within
baselines (:func:`~orchestrator.analysis.stats.fixed_groups_interval`). The claim "reward
budgeting improves the average" reproduces when the interval lies above 0, is contradicted
when it lies below, and is inconclusive otherwise (``bench/findings_rules.py`` gives its
verdicts the same words).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from orchestrator.analysis.stats import Interval, fixed_groups_interval
from orchestrator.analysis.tables import AVERAGE, Table

if TYPE_CHECKING:
    import pandas as pd

REPRODUCES, CONTRADICTS, INCONCLUSIVE = "reproduces", "contradicts", "inconclusive"
# What the findings page says of the same comparison; keep it true to the page.
FINDINGS = ("docs/findings.md, six baselines: inconclusive at 100 steps (finding 1), "
            "reproduces at 300 steps (finding 1b)")


def directional_verdict(interval: Interval) -> str:
    """The rule's word for the claim "the difference is above 0" (no interval: inconclusive)."""
    if interval.low is not None and interval.low > 0:
        return REPRODUCES
    if interval.high is not None and interval.high < 0:
        return CONTRADICTS
    return INCONCLUSIVE


def _paired_groups(table: Table, column: str) -> dict[str, tuple[float, ...]]:
    """Each delta row's paired differences in ``column`` (rows without a pair left out)."""
    if column not in table.columns:
        return {}
    j = table.columns.index(column)
    rows = [row for block in table.blocks for row in block.rows if row.kind == "delta"]
    return {str(i): row.cells[j].differences for i, row in enumerate(rows)
            if row.cells[j].differences}


def verdict_line(table: Table, steps: Collection[int] = ()) -> str | None:
    """``RB − baseline, Average: -0.16 [-0.50, +0.18] (n=6 pairs, 2 baselines, pooled paired
    t): inconclusive at 100 steps; <what the findings page says>``, in the table's units;
    ``steps``: the runs' lengths (named when they are one). ``None`` without a delta row
    with a pair in the Average column."""
    groups = _paired_groups(table, AVERAGE)
    if not groups:
        return None
    interval = fixed_groups_interval(groups)
    d = table.digits
    bounds = ("no interval (one seed per baseline)" if interval.low is None
              or interval.high is None else f"[{interval.low:+.{d}f}, {interval.high:+.{d}f}]")
    lengths = sorted(set(steps))
    at = f" at {lengths[0]} step{'s' * (lengths[0] != 1)}" if len(lengths) == 1 else ""
    return (f"RB − baseline, {AVERAGE}: {interval.estimate:+.{d}f} {bounds} (n={interval.n} "
            f"pairs, {len(groups)} baseline{'s' * (len(groups) != 1)}, pooled paired t): "
            f"{directional_verdict(interval)}{at}; {FINDINGS}")


def closing_lines(table: Table | None, frame: pd.DataFrame, made_by: str = "") -> list[str]:
    """The lines that end the demo's output: the table's verdict (:func:`verdict_line`),
    when it has one, then which code and machine made its numbers (last, so a pasted
    output says so)."""
    steps = [int(s) for s in frame["total_steps"].dropna()] if "total_steps" in frame else []
    verdict = verdict_line(table, steps) if table is not None else None
    return [*([] if verdict is None else [f"verdict:   {verdict}"]),
            f"made by:   {made_by or 'not recorded'}"]
