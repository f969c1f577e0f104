"""``kappa demo``'s last line: the findings page's rule on the table's pooled '+ RB' delta,
on synthetic rows whose answer is known."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd

from orchestrator.analysis.frame import CellResult, frame_from_results
from orchestrator.analysis.report import ablation_table
from orchestrator.analysis.verdict import (
    CONTRADICTS,
    FINDINGS,
    INCONCLUSIVE,
    REPRODUCES,
    closing_lines,
    directional_verdict,
    verdict_line,
)

# Per baseline and seed, accuracy on two benchmarks without RB, and RB's change (points).
BASE = {"grpo": (0.70, 0.10), "drgrpo": (0.72, 0.12)}
GAIN = {("grpo", 0): 0.5, ("grpo", 1): -1.0, ("grpo", 2): 0.2,
        ("drgrpo", 0): 0.9, ("drgrpo", 1): 0.1, ("drgrpo", 2): -0.4}


def _frame(gain: dict[tuple[str, int], float], steps: int | None = 100) -> pd.DataFrame:
    cells = []
    for (baseline, seed), g in gain.items():
        for rb in (False, True):
            a, b = BASE[baseline]
            shift = (0.01 * seed) + (g / 100 if rb else 0.0)
            cells.append(CellResult(
                "demo", f"{baseline}-{rb}-{seed}", "succeeded",
                {"baseline": baseline, "reward_budget": rb, "seed": seed},
                {"eval/arith-val/mean@8": a + shift, "eval/arith-hard/mean@8": b + shift},
                total_steps=steps))
    return frame_from_results(cells)


def test_the_line_is_the_pooled_paired_interval_of_the_average_column() -> None:
    frame = _frame(GAIN)
    _, table, _ = ablation_table(frame)
    assert table is not None
    line, made = closing_lines(table, frame, "1 environment (embedded v1)")
    assert made == "made by:   1 environment (embedded v1)"
    # Both benchmarks move by the gain, so the Average's differences are the gains (points):
    # grpo -0.1 ± its spread, drgrpo +0.2; pooled within baselines over 2 + 2 = 4 df.
    from scipy.stats import t

    groups = [[GAIN[(b, s)] for s in range(3)] for b in BASE]
    means = [sum(g) / 3 for g in groups]
    pooled = sum((x - m) ** 2 for g, m in zip(groups, means, strict=True) for x in g) / 4
    half = t.ppf(0.975, 4) * math.sqrt(2 * pooled / 3) / 2
    est = sum(means) / 2
    assert line == (f"verdict:   RB − baseline, Average: {est:+.2f} [{est - half:+.2f}, "
                    f"{est + half:+.2f}] (n=6 pairs, 2 baselines, pooled paired t): "
                    f"inconclusive at 100 steps; {FINDINGS}")


def test_the_rule_says_reproduces_or_contradicts_when_the_interval_is_off_0() -> None:
    up = {k: 2.0 + 0.1 * k[1] for k in GAIN}
    _, table, _ = ablation_table(_frame(up, steps=None))
    assert table is not None
    line = verdict_line(table)
    assert line is not None and ": reproduces; docs/findings.md" in line  # no steps: none named
    _, table, _ = ablation_table(_frame({k: -v for k, v in up.items()}))
    assert table is not None
    assert f": {CONTRADICTS} at 300 steps;" in (verdict_line(table, [300, 300]) or "")
    assert f": {CONTRADICTS} at 1 step;" in (verdict_line(table, [1]) or "")
    assert f": {CONTRADICTS};" in (verdict_line(table, [100, 300]) or "")  # lengths differ


def test_no_delta_no_line() -> None:
    frame = _frame(GAIN)
    only_base = frame[frame["axis.reward_budget"] == False]  # noqa: E712
    _, table, _ = ablation_table(only_base.reset_index(drop=True))
    assert table is not None and closing_lines(table, only_base) == ["made by:   not recorded"]
    assert closing_lines(None, frame) == ["made by:   not recorded"]


def test_one_seed_per_baseline_has_no_interval_and_says_so() -> None:
    frame = _frame({k: v for k, v in GAIN.items() if k[1] == 0})
    _, table, _ = ablation_table(frame)
    assert table is not None
    line = verdict_line(table, [100])
    assert line is not None
    assert "+0.70 no interval (one seed per baseline) (n=2 pairs, 2 baselines" in line
    assert f"): {INCONCLUSIVE} at 100 steps" in line


def test_the_findings_rules_use_the_same_words() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    from findings_rules import directional

    from orchestrator.analysis.stats import Interval

    for interval, word in ((Interval(1.0, 0.5, 1.5, 6), REPRODUCES),
                           (Interval(-1.0, -1.5, -0.5, 6), CONTRADICTS),
                           (Interval(0.1, -0.5, 0.7, 6), INCONCLUSIVE)):
        assert directional_verdict(interval) == directional(interval, "claim").verdict == word


def test_findings_reference_is_what_the_page_says() -> None:
    page = (Path(__file__).resolve().parents[3] / "docs" / "findings.md").read_text()
    # Finding 1 (100 steps) inconclusive, finding 1b (300 steps) reproduces, as the page has.
    assert "| 1 | Reward budgeting improves the six baselines on average" in page
    row_1 = next(r for r in page.splitlines() if r.startswith("| 1 |"))
    row_1b = next(r for r in page.splitlines() if r.startswith("| 1b |"))
    assert "**inconclusive**" in row_1 and "**reproduces**" in row_1b
    assert "inconclusive at 100 steps (finding 1)" in FINDINGS
    assert "reproduces at 300 steps (finding 1b)" in FINDINGS
