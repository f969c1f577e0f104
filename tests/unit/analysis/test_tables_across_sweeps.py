"""Tables over several sweeps: cells pooled by their axes, the sweep of each row shown, a
point that ran in two sweeps shown once per sweep with what differs in its settings; and
the step at which a delta compares its pairs when a stopping rule ended some early."""

from __future__ import annotations

from typing import Any

import pandas as pd

from orchestrator.analysis.combined import _with_all_axes, settings_differences
from orchestrator.analysis.frame import DIFF_COLUMN, CellResult, frame_from_results
from orchestrator.analysis.tables import DeltaSpec, TableSpec, build_table, render
from orchestrator.analysis.tables.compared import RunLength, compare_note, run_length

SPEC = TableSpec(rows=("baseline",), delta=DeltaSpec(axis="reward_budget", base="false"),
                 metrics="eval/*/mean@8")


def cell(sweep: str, rb: bool, seed: int, value: float, *, steps: int = 3,
         settings: dict[str, Any] | None = None, step: int | None = None,
         total: int | None = None, stop: str | None = None) -> CellResult:
    axes = {"baseline": "grpo", "reward_budget": rb, "seed": seed}
    return CellResult(sweep, f"{sweep}-{int(rb)}-{seed}", "succeeded", axes,
                      {"eval/x/mean@8": value},
                      settings={"max_steps": steps, **axes, **(settings or {})},
                      step=step, total_steps=total, stop_reason=stop)


def combined(cells: list[CellResult]) -> pd.DataFrame:
    cells = _with_all_axes(cells)
    diffs = settings_differences(cells)
    frame = frame_from_results(cells)
    frame[DIFF_COLUMN] = [diffs.get((c.sweep, c.cell_id)) for c in cells]
    return frame


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ")]


def test_a_new_variant_against_old_baselines_pairs_across_sweeps() -> None:
    old = [cell("old", False, s, 0.5 + s / 100) for s in range(2)]
    new = [cell("new", True, s, 0.6 + s / 100) for s in range(2)]
    text = render(build_table(combined(old + new), SPEC), "markdown")
    rows = lines(text)
    assert rows[0] == "| Method | Sweep | n | x | Average |"
    assert rows[2].startswith("| GRPO | old | 2 | 50.50")
    assert rows[3].startswith("| + RB | new vs old | 2 | +10.00")
    assert "Sweep: the sweep(s) each row's runs come from" in text
    assert "never averaged together" not in text  # nothing ran twice


def test_more_seeds_pool_and_a_point_run_twice_is_shown_once_per_sweep() -> None:
    first = [cell("a", rb, s, 0.5 + 0.1 * rb) for rb in (False, True) for s in (0, 1)]
    more = [cell("b", rb, 2, 0.52 + 0.1 * rb) for rb in (False, True)]
    pooled = render(build_table(combined(first + more), SPEC), "markdown")
    assert lines(pooled)[2].startswith("| GRPO | a, b | 3 |")
    # Sweep c ran seed 0 again with a longer run: its rows stand apart, never averaged.
    again = [cell("c", rb, 0, 0.9, steps=6) for rb in (False, True)]
    text = render(build_table(combined(first + again), SPEC), "markdown")
    rows = lines(text)
    assert [r.split(" | ")[:3] for r in rows[2:]] == [
        ["| GRPO", "a (max_steps=3)", "2"], ["| + RB", "a (max_steps=3)", "2"],
        ["| GRPO", "c (max_steps=6)", "1"], ["| + RB", "c (max_steps=6)", "1"]]
    assert "90.00" in rows[4] and "never averaged together" in text
    frame = combined(first + again)
    assert set(frame[DIFF_COLUMN].dropna()) == {"max_steps=3", "max_steps=6"}


def test_an_axis_one_sweep_lacks_comes_from_its_settings() -> None:
    old = [CellResult("old", f"o{s}", "succeeded", {"baseline": "grpo", "seed": s},
                      {"eval/x/mean@8": 0.5}, settings={"reward_budget": False, "seed": s})
           for s in range(2)]
    new = [cell("new", True, s, 0.6) for s in range(2)]
    frame = combined(old + new)
    assert list(frame["axis.reward_budget"]) == [False, False, True, True]
    assert lines(render(build_table(frame, SPEC), "markdown"))[3].startswith("| + RB | new vs old")


def test_one_sweep_tables_are_unchanged() -> None:
    one = [cell("a", rb, s, 0.5) for rb in (False, True) for s in (0, 1)]
    assert lines(render(build_table(combined(one), SPEC), "markdown"))[0] == (
        "| Method | n | x | Average |")


def test_compare_notes() -> None:
    full, early = RunLength(150, False), RunLength(120, True)
    assert compare_note([(0, full, full)], "+ RB") is None
    assert compare_note([(0, early, early), (1, early, early)], "+ RB") == (
        "compared at step 120, stopped early")
    assert compare_note([(0, early, full)], "+ RB") == (
        "steps differ (base vs + RB): 120 vs 150 (seed 0)")
    assert run_length("plateau at step 9", 9, 9).early  # a rule's stop counts as early
    assert run_length(None, 8, 10).early and not run_length(None, 10, 10).early
    assert not run_length(None, None, None).early


def test_a_delta_row_says_where_its_pairs_were_compared() -> None:
    stopped = "plateau at step 120 (val-core/x/acc/mean@1)"
    cells = [cell("a", False, s, 0.5, step=120, total=150, stop=stopped) for s in (0, 1)]
    cells += [cell("a", True, 0, 0.6, step=120, total=150, stop=stopped),
              cell("a", True, 1, 0.6, step=150, total=150)]
    table = build_table(frame_from_results(cells), SPEC)
    text = render(table, "markdown")
    assert "| + RB §1 | 2 |" in text
    assert "§1 GRPO, + RB: steps differ (base vs + RB): 120 vs 150 (seed 1)." in text
    assert r"+ RB \S{}1" in render(table, "latex")
    assert "+ RB §1" in render(table, "html")
    same = [c if c.step == 120 else CellResult(**{**c.__dict__, "step": 120}) for c in cells]
    text = render(build_table(frame_from_results(same), SPEC), "markdown")
    assert "§1 GRPO, + RB: compared at step 120, stopped early." in text
    full = [CellResult(**{**c.__dict__, "step": 150, "stop_reason": None}) for c in cells]
    assert "§" not in render(build_table(frame_from_results(full), SPEC), "markdown")


def test_the_report_names_cells_by_their_axes_and_sweep() -> None:
    import numpy as np

    from orchestrator.analysis.report import ReportInputs, render_report

    cells = [CellResult(s, "same-id", "succeeded", {"reward_budget": rb, "seed": 0},
                        {"eval/x/mean@8": 0.5}) for s, rb in (("a", False), ("b", True))]
    frame = frame_from_results(cells)
    steps = np.arange(1, 201)
    value = 0.2 + 0.5 * (1 - np.exp(-steps / 20))
    curves = pd.concat([pd.DataFrame({"cell_id": key, "step": steps, "value": value,
                                      "metric": "val-core/x/acc/mean@1", "axis.seed": 0})
                        for key in ("a/same-id", "b/same-id")])
    html = render_report(ReportInputs(sweep="a + b", frame=frame, curves=curves))
    assert '<td title="a/same-id">a, reward_budget=False</td>' in html
    assert '<td title="b/same-id">b, reward_budget=True</td>' in html


def test_a_seed_set_in_base_is_a_replicate_like_a_seed_axis() -> None:
    def based(sweep: str, rb: bool, seed: int, value: float, steps: int = 3) -> CellResult:
        # Each sweep sets its one seed in base: seed is not an axis of either.
        axes = {"baseline": "grpo", "reward_budget": rb}
        return CellResult(sweep, f"{sweep}-{int(rb)}", "succeeded", axes,
                          {"eval/x/mean@8": value},
                          settings={"max_steps": steps, "seed": seed, **axes})

    first = [based("s0", rb, 0, 0.5 + 0.1 * rb) for rb in (False, True)]
    second = [based("s1", rb, 1, 0.52 + 0.1 * rb) for rb in (False, True)]
    frame = combined(first + second)
    assert list(frame["axis.seed"]) == [0, 0, 1, 1]
    assert frame[DIFF_COLUMN].isna().all()
    text = render(build_table(frame, SPEC), "markdown")
    rows = lines(text)
    assert [r.split(" | ")[:3] for r in rows[2:]] == [["| GRPO", "s0, s1", "2"],
                                                      ["| + RB", "s0, s1", "2"]]
    assert "never averaged" not in text
    # Settings that differ beyond the seed are still never averaged, and named.
    longer = [based("s2", rb, 2, 0.9, steps=6) for rb in (False, True)]
    text = render(build_table(combined(first + longer), SPEC), "markdown")
    assert [r.split(" | ")[:3] for r in lines(text)[2:]] == [
        ["| GRPO", "s0 (max_steps=3)", "1"], ["| + RB", "s0 (max_steps=3)", "1"],
        ["| GRPO", "s2 (max_steps=6)", "1"], ["| + RB", "s2 (max_steps=6)", "1"]]
    assert "never averaged together" in text and "differ beyond the seed" in text
