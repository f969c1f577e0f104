"""Tables from known numbers: averages, deltas, bold, CIs, missing cells, errors."""

from __future__ import annotations

import csv
import io
import math

import pandas as pd
import pytest

from orchestrator.analysis.frame import CellResult, frame_from_results
from orchestrator.analysis.tables import DeltaSpec, TableSpec, build_table, render
from orchestrator.analysis.tables.render import cell_text
from orchestrator.errors import UserInputError

MAIN = TableSpec(
    rows=("baseline",),
    delta=DeltaSpec.parse("reward_budget=false"),
    blocks="model",
    metrics="eval/*/mean@8",
)


def _row(table, block: int, index: int) -> list[str]:  # type: ignore[no-untyped-def]
    row = table.blocks[block].rows[index]
    return [cell_text(c, 2, show_ci=True) for c in row.cells]


def test_main_table_reproduces_table2(table2_frame: pd.DataFrame) -> None:
    table = build_table(table2_frame, MAIN)
    assert table.columns == ("AMC23", "AIME24", "AIME25", "MATH500", "Olympiad", "Average")
    assert [b.title for b in table.blocks] == ["Qwen3-8B", "Llama3.2-3B"]
    qwen = table.blocks[0]
    assert [r.labels[0] for r in qwen.rows] == ["GRPO", "+ RB", "DrGRPO", "+ RB", "GSPO", "+ RB"]
    assert _row(table, 0, 0) == ["82.50", "26.67", "43.33", "95.60", "51.27", "59.87"]
    assert _row(table, 0, 1) == ["+10.00", "+10.00", "+10.00", "+1.20", "+2.12", "+6.66"]
    assert _row(table, 0, 3) == ["+5.00", "+6.67", "+3.33", "-0.20", "+1.27", "+3.21"]
    assert _row(table, 1, 2) == ["30.00", "10.00", "0.00", "68.60", "14.94", "24.71"]
    assert _row(table, 1, 3)[-1] == "+5.80"
    assert all(r.n == "1" for b in table.blocks for r in b.rows)


def test_bold_marks_the_best_value_per_column_and_kind(table2_frame: pd.DataFrame) -> None:
    qwen = build_table(table2_frame, MAIN).blocks[0]
    bold = {(i, j) for i, r in enumerate(qwen.rows) for j, c in enumerate(r.cells) if c.bold}
    # AMC23: GSPO 90.00 best absolute; GRPO's +10.00 best delta.
    assert (4, 0) in bold and (0, 0) not in bold and (1, 0) in bold
    # AIME24 absolute: DrGRPO 30.00; ties are all bold (AIME25: GRPO and DrGRPO 43.33).
    assert (2, 1) in bold
    assert {(0, 2), (2, 2)} <= bold
    # Average absolute: DrGRPO 60.10 > GRPO 59.87 > GSPO 59.44.
    assert (2, 5) in bold and (0, 5) not in bold


def test_crossing_table_reproduces_table3(table3_frame: pd.DataFrame) -> None:
    table = build_table(table3_frame, TableSpec(cross=("use_kl_loss", "reward_budget")))
    assert table.label_headers == ("KL", "RB")
    rows = table.blocks[0].rows
    assert [r.labels for r in rows] == [(True, False), (True, True), (False, False), (False, True)]
    # The paper prints 66.53 (averaged before rounding); the rounded scores average 66.538.
    averages = [cell_text(r.cells[-1], 2, True) for r in rows]
    assert averages == ["59.87", "66.54", "60.27", "65.65"]
    md = render(table, "markdown")
    assert "| ✓ | ✗ | 1 | 82.50 |" in md
    assert r"$\checkmark$ & $\times$ & 1 & 82.50" in render(table, "latex")


def _seeded(values: dict[tuple[str, bool, int], float | None]) -> pd.DataFrame:
    cells = []
    for (baseline, rb, seed), v in values.items():
        ok = v is not None
        cells.append(
            CellResult(
                "s",
                f"{baseline}-{rb}-{seed}",
                "succeeded" if ok else "failed",
                {"baseline": baseline, "reward_budget": rb, "seed": seed},
                {} if v is None else {"eval/arith/mean@8": v},
            )
        )
    return frame_from_results(cells)


def test_seeds_give_t_intervals_and_paired_t_deltas() -> None:
    frame = _seeded(
        {
            ("grpo", False, 0): 0.50,
            ("grpo", False, 1): 0.52,
            ("grpo", False, 2): 0.54,
            ("grpo", True, 0): 0.60,
            ("grpo", True, 1): 0.63,
            ("grpo", True, 2): 0.66,
        }
    )
    table = build_table(
        frame,
        TableSpec(
            delta=DeltaSpec(axis="reward_budget", base="false"),
            metrics="eval/*/mean@8",
            average=False,
        ),
    )
    base, delta = table.blocks[0].rows
    # points: 50, 52, 54 -> sd 2, sem 2/sqrt(3), t_{0.975,2} = 4.302652729749464
    half = 4.302652729749464 * 2 / math.sqrt(3)
    iv = base.cells[0].interval
    assert iv is not None and iv.estimate == pytest.approx(52.0)
    assert iv.half_width == pytest.approx(half)
    assert cell_text(base.cells[0], 2, True) == f"52.00 ± {half:.2f}"
    # paired differences 10, 11, 12 points: sd 1, so the same t quantile over sem 1/sqrt(3)
    got = delta.cells[0].interval
    assert got is not None and got.estimate == pytest.approx(11.0)
    d_half = 4.302652729749464 / math.sqrt(3)
    assert (got.low, got.high) == pytest.approx((11.0 - d_half, 11.0 + d_half))
    assert delta.cells[0].differences == pytest.approx((10.0, 11.0, 12.0))
    assert delta.cells[0].significant
    assert cell_text(delta.cells[0], 2, True).endswith("]†")
    assert (base.n, delta.n) == ("3", "3")


def test_failed_and_missing_cells_are_shown_not_dropped() -> None:
    frame = _seeded(
        {
            ("grpo", False, 0): 0.5,
            ("grpo", False, 1): None,
            ("grpo", True, 0): 0.6,
            ("grpo", True, 1): 0.7,
            ("dapo", False, 0): None,
            ("dapo", True, 0): 0.6,
        }
    )
    spec = TableSpec(delta=DeltaSpec(axis="reward_budget", base="false"), metrics="eval/*/mean@8")
    grpo_base, grpo_rb, dapo_base, dapo_rb = build_table(frame, spec).blocks[0].rows
    assert grpo_base.n == "1/2"
    assert grpo_rb.n == "1/2"  # only seed 0 is paired, of seeds 0 and 1
    assert grpo_rb.cells[0].interval is not None
    assert grpo_rb.cells[0].interval.estimate == pytest.approx(10.0)
    assert dapo_base.n == "0/1"
    assert cell_text(dapo_base.cells[0], 2, True) == "— (failed)"
    assert cell_text(dapo_rb.cells[0], 2, True) == "— (no base run)"
    assert "— (failed)" in render(build_table(frame, spec), "markdown")


def test_running_cells_show_their_state() -> None:
    frame = frame_from_results(
        [
            CellResult(
                "s", "a", "succeeded", {"baseline": "grpo", "seed": 0}, {"eval/x/mean@8": 0.5}
            ),
            CellResult("s", "b", "running", {"baseline": "dapo", "seed": 0}, {}),
            CellResult("s", "c", "pending", {"baseline": "dapo", "seed": 1}, {}),
        ]
    )
    rows = build_table(frame, TableSpec()).blocks[0].rows
    assert cell_text(rows[1].cells[0], 2, True) == "— (pending, running)"


def test_raw_scale_and_values_outside_unit_interval_are_not_scaled() -> None:
    frame = frame_from_results(
        [
            CellResult("s", "a", "succeeded", {"baseline": "grpo"}, {"eval/len/mean@8": 812.0}),
        ]
    )
    assert cell_text(build_table(frame, TableSpec()).blocks[0].rows[0].cells[0], 1, True) == "812.0"
    unit = frame_from_results(
        [
            CellResult("s", "a", "succeeded", {"baseline": "grpo"}, {"eval/x/mean@8": 0.25}),
        ]
    )
    raw = build_table(unit, TableSpec(scale="raw", digits=3)).blocks[0].rows[0].cells[0]
    assert cell_text(raw, 3, True) == "0.250"


def test_all_problems_are_reported_at_once(table2_frame: pd.DataFrame) -> None:
    spec = TableSpec(rows=("method",), blocks="modle", metrics="eval/*/pass@1")
    with pytest.raises(UserInputError) as err:
        build_table(table2_frame, spec)
    locations = [p.location for p in err.value.problems]
    assert locations == ["--rows method", "--blocks", "--metrics"]
    assert "baseline" in (err.value.problems[0].allowed or "")


def test_an_unplaced_varying_axis_is_an_error(table2_frame: pd.DataFrame) -> None:
    with pytest.raises(UserInputError) as err:
        build_table(table2_frame, TableSpec(delta=DeltaSpec(axis="reward_budget", base="false")))
    assert "model" in err.value.render()
    # ... which --where resolves.
    spec = TableSpec(
        delta=DeltaSpec(axis="reward_budget", base="false"), where={"model": "Qwen3-8B"}
    )
    assert len(build_table(table2_frame, spec).blocks[0].rows) == 6


def test_delta_base_value_must_exist(table2_frame: pd.DataFrame) -> None:
    with pytest.raises(UserInputError, match="never takes this value"):
        build_table(
            table2_frame,
            MAIN.model_copy(update={"delta": DeltaSpec(axis="reward_budget", base="maybe")}),
        )


def test_csv_and_html_renderers(table2_frame: pd.DataFrame) -> None:
    table = build_table(table2_frame, MAIN)
    rows = list(csv.DictReader(io.StringIO(render(table, "csv"))))
    assert rows[0]["block"] == "Qwen3-8B" and rows[0]["Method"] == "GRPO"
    assert float(rows[0]["Average"]) == pytest.approx(59.874)
    assert rows[1]["kind"] == "delta" and float(rows[1]["AMC23"]) == pytest.approx(10.0)
    html = render(table, "html")
    assert html.count('<tr class="delta">') == 6
    assert "<strong>90.00</strong>" in html
    with pytest.raises(UserInputError, match="unknown table format"):
        render(table, "xlsx")


def test_deltas_pair_single_runs_when_there_is_no_seed_axis() -> None:
    frame = frame_from_results(
        [
            CellResult(
                "s",
                "a",
                "succeeded",
                {"baseline": "grpo", "reward_budget": False},
                {"eval/x/mean@8": 0.5},
            ),
            CellResult(
                "s",
                "b",
                "succeeded",
                {"baseline": "grpo", "reward_budget": True},
                {"eval/x/mean@8": 0.55},
            ),
        ]
    )
    spec = TableSpec(delta=DeltaSpec(axis="reward_budget", base="false"), average=False)
    _, delta = build_table(frame, spec).blocks[0].rows
    assert cell_text(delta.cells[0], 2, True) == "+5.00"
    assert delta.n == "1"


def test_list_valued_axes_group_like_any_other() -> None:
    frame = frame_from_results(
        [
            CellResult(
                "s", f"c{i}", "succeeded", {"clip": clip, "seed": seed}, {"eval/x/mean@8": v}
            )
            for i, (clip, seed, v) in enumerate(
                [([0.2, 0.28], 0, 0.4), ([0.2, 0.28], 1, 0.6), ([0.1, 0.1], 0, 0.3)]
            )
        ]
    )
    rows = build_table(frame, TableSpec(rows=("clip",), average=False)).blocks[0].rows
    assert [(r.labels[0], r.n) for r in rows] == [("[0.2, 0.28]", "2"), ("[0.1, 0.1]", "1")]
    assert rows[0].cells[0].interval is not None
    assert rows[0].cells[0].interval.estimate == pytest.approx(50.0)


def test_notes_name_the_delta_interval_and_its_mark() -> None:
    frame = _seeded({("grpo", rb, s): 0.5 + 0.01 * s + 0.05 * rb
                     for rb in (False, True) for s in range(3)})
    spec = TableSpec(delta=DeltaSpec(axis="reward_budget", base="false"),
                     metrics="eval/*/mean@8", confidence=0.9)
    notes = build_table(frame, spec).notes
    (delta,) = [n for n in notes if n.startswith("Delta rows:")]
    assert ("[low, high] = 90% paired t-interval over seeds (Student t, n − 1 degrees of "
            "freedom, as for the means); † = the interval excludes 0.") in delta
    assert "bootstrap" not in " ".join(notes)
