"""Tables on sweeps other than the toy one: other row/delta/block axes, gaps in the data."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pytest

from orchestrator.analysis.frame import CellResult, frame_from_results
from orchestrator.analysis.stats import Interval
from orchestrator.analysis.tables import DeltaSpec, TableSpec, build_table, render
from orchestrator.analysis.tables.render import cell_text, frame_table
from orchestrator.errors import UserInputError

T_975_1 = 12.706204736174698  # Student t quantile, 1 degree of freedom
T_975_2 = 4.302652729749464  # 2 degrees of freedom


def _cell(cid: str, axes: Mapping[str, Any], metrics: Mapping[str, float] | None) -> CellResult:
    state = "succeeded" if metrics is not None else "failed"
    return CellResult("s", cid, state, dict(axes), dict(metrics or {}))


def _texts(row: Any, digits: int = 2) -> list[str]:
    return [cell_text(c, digits, show_ci=True) for c in row.cells]


def _clip_frame() -> pd.DataFrame:
    """The spurious-rewards clip axis (``inf`` is a string in the YAML) × 3 seeds."""
    cells = []
    for i, clip in enumerate([0.2, 0.15, "inf"]):
        for seed in range(3):
            value = 0.50 + 0.02 * i + (0.01 * seed if clip == "inf" else 0.0)
            cells.append(
                _cell(
                    f"c{i}{seed}",
                    {"clip_ratio": clip, "seed": seed},
                    {"eval/math500/mean@1": value},
                )
            )
    return frame_from_results(cells)


def test_delta_without_row_axes_labels_rows_with_the_delta_axis() -> None:
    spec = TableSpec(
        rows=(), delta=DeltaSpec.parse("clip_ratio=0.2"), metrics="eval/*/mean@1", average=False
    )
    table = build_table(_clip_frame(), spec)
    assert table.label_headers == ("clip_ratio",)
    rows = table.blocks[0].rows
    assert [r.labels for r in rows] == [("0.2",), ("+ clip_ratio=0.15",), ("+ clip_ratio=inf",)]
    # Every rendered row has as many cells as the header.
    md = render(table, "markdown").splitlines()
    assert len({line.count("|") for line in md[:5]}) == 1
    head, *lines = list(csv.reader(io.StringIO(render(table, "csv"))))
    assert all(len(line) == len(head) for line in lines)
    # seed-wise diffs for inf: +4, +5, +6 points -> mean +5, a paired t-interval over pairs.
    iv = rows[2].cells[0].interval
    expected = _scipy_t([4.0, 5.0, 6.0])
    assert iv is not None and iv.estimate == pytest.approx(5.0)
    assert (iv.low, iv.high) == pytest.approx(expected)


def test_non_boolean_row_axis_with_inf_and_t_intervals_by_hand() -> None:
    spec = TableSpec(rows=("clip_ratio",), metrics="eval/*/mean@1", average=False)
    rows = build_table(_clip_frame(), spec).blocks[0].rows
    assert [r.labels[0] for r in rows] == ["0.2", "0.15", "inf"]
    # inf: 54, 55, 56 -> mean 55, sd 1, half width t * 1 / sqrt(3).
    iv = rows[2].cells[0].interval
    assert iv is not None and iv.estimate == pytest.approx(55.0)
    assert iv.half_width == pytest.approx(T_975_2 / math.sqrt(3))
    assert rows[2].cells[0].bold and not rows[0].cells[0].bold
    where = TableSpec(rows=("clip_ratio",), metrics="eval/*/mean@1", where={"seed": "0"})
    assert all(r.n == "1" for r in build_table(_clip_frame(), where).blocks[0].rows)


def test_a_where_value_no_cell_has_is_an_error_listing_the_values() -> None:
    spec = TableSpec(rows=("clip_ratio",), metrics="eval/*/mean@1", where={"clip_ratio": "0.3"})
    with pytest.raises(UserInputError) as err:
        build_table(_clip_frame(), spec)
    (problem,) = err.value.problems
    assert problem.location == "--where clip_ratio"
    assert problem.allowed == "0.2, 0.15, inf"


def test_where_filters_that_exclude_each_other_are_an_error() -> None:
    frame = frame_from_results(
        [
            _cell("a", {"clip_ratio": 0.2, "group_size": 8, "seed": 0}, {"eval/x/mean@1": 0.5}),
            _cell("b", {"clip_ratio": 0.1, "group_size": 16, "seed": 0}, {"eval/x/mean@1": 0.5}),
        ]
    )
    spec = TableSpec(
        rows=("seed",), metrics="eval/*/mean@1", where={"clip_ratio": "0.2", "group_size": "16"}
    )
    with pytest.raises(UserInputError, match="every --where filter"):
        build_table(frame, spec)


def test_an_axis_placed_twice_is_an_error() -> None:
    spec = TableSpec(
        rows=("clip_ratio",), delta=DeltaSpec.parse("clip_ratio=0.2"), metrics="eval/*/mean@1"
    )
    with pytest.raises(UserInputError) as err:
        build_table(_clip_frame(), spec)
    assert err.value.problems[0].location == "--rows and --delta"


def test_kappa_variant_delta_counts_a_running_seed() -> None:
    cells = []
    for i, kappa in enumerate(["k5000", "k2000", "k200"]):
        for seed in range(2):
            running = (kappa, seed) == ("k200", 1)
            metrics = None if running else {"eval/aime/mean@8": 0.3 + 0.01 * i}
            cell = _cell(f"{kappa}{seed}", {"kappa": kappa, "seed": seed}, metrics)
            cells.append(
                CellResult(
                    cell.sweep,
                    cell.cell_id,
                    "running" if running else cell.state,
                    cell.axes,
                    cell.final_metrics,
                )
            )
    spec = TableSpec(rows=(), delta=DeltaSpec.parse("kappa=k5000"), metrics="eval/*/mean@8")
    base, k2000, k200 = build_table(frame_from_results(cells), spec).blocks[0].rows
    assert (base.labels, base.n) == (("k5000",), "2")
    assert (k2000.labels[0], k2000.n) == ("+ kappa=k2000", "2")
    assert (k200.labels[0], k200.n) == ("+ kappa=k200", "1/2")
    assert _texts(k200)[0] == "+2.00"  # one pair: no interval


def test_paired_stats_use_the_pairs_present_and_say_how_many() -> None:
    base_pts, treat_pts = [50.0, 53.0, 55.0], [56.0, 57.0, None]
    cells = []
    for rb, points in ((False, base_pts), (True, treat_pts)):
        for seed, p in enumerate(points):
            cells.append(
                _cell(
                    f"{rb}{seed}",
                    {"reward_budget": rb, "seed": seed},
                    None if p is None else {"eval/x/mean@8": p / 100},
                )
            )
    spec = TableSpec(rows=(), delta=DeltaSpec.parse("reward_budget=false"), average=False)
    table = build_table(frame_from_results(cells), spec)
    base, delta = table.blocks[0].rows
    assert (base.n, delta.n) == ("3", "2/3")
    iv = delta.cells[0].interval
    assert iv is not None and iv.n == 2 and iv.estimate == pytest.approx(5.0)
    # two pairs, diffs 6 and 4: sd sqrt(2), sem 1, t_{0.975, 1} = 12.706 (not their range)
    assert (iv.low, iv.high) == pytest.approx((5.0 - 12.706204736174698, 5.0 + 12.706204736174698))
    assert not delta.cells[0].significant
    assert "of all seeds either side has" in render(table, "markdown")


def test_blocks_with_different_benchmarks_average_their_own() -> None:
    cells = []
    for model, benches in (("qwen", ("amc", "aime")), ("llama", ("gsm8k",))):
        for seed in range(2):
            metrics = {
                f"eval/{b}/mean@8": 0.2 + 0.1 * j + 0.02 * seed for j, b in enumerate(benches)
            }
            cells.append(_cell(f"{model}{seed}", {"model": model, "seed": seed}, metrics))
    table = build_table(frame_from_results(cells), TableSpec(rows=(), blocks="model"))
    assert table.columns == ("amc", "aime", "gsm8k", "Average")
    qwen, llama = (b.rows[0] for b in table.blocks)
    # qwen runs average (20+30)/2=25 and (22+32)/2=27; llama's only benchmark 20 and 22.
    assert _texts(qwen)[3] == f"26.00 ± {T_975_1 * 1.0:.2f}"
    assert _texts(llama)[3] == f"21.00 ± {T_975_1 * 1.0:.2f}"
    assert _texts(llama)[0] == "— (no metric)"


def test_a_metric_some_runs_lack_says_how_many_runs_it_rests_on() -> None:
    cells = [
        _cell("a", {"seed": 0}, {"eval/x/mean@8": 0.50, "eval/y/mean@8": 0.30}),
        _cell("b", {"seed": 1}, {"eval/x/mean@8": 0.52, "eval/y/mean@8": 0.32}),
        _cell("c", {"seed": 2}, {"eval/x/mean@8": 0.54, "eval/y/mean@8": math.nan}),
    ]
    table = build_table(frame_from_results(cells), TableSpec(rows=()))
    (row,) = table.blocks[0].rows
    assert row.n == "3"
    x, y, avg = row.cells
    assert not x.partial and y.partial and avg.partial
    assert _texts(row)[1] == f"31.00 ± {T_975_1 * 1.0:.2f} (n=2)"
    assert _texts(row)[2].endswith("(n=2)")
    assert any(n.startswith("(n=k)") for n in table.notes)
    line = next(csv.DictReader(io.StringIO(render(table, "csv"))))
    assert (line["x n"], line["y n"]) == ("3", "2")


def test_one_seed_has_no_interval_and_says_n_1() -> None:
    frame = frame_from_results(
        [
            _cell("a", {"baseline": b, "seed": 0}, {"eval/x/mean@8": v})
            for b, v in (("grpo", 0.4), ("dapo", 0.5))
        ]
    )
    rows = build_table(frame, TableSpec()).blocks[0].rows
    assert [(r.n, _texts(r)[0]) for r in rows] == [("1", "40.00"), ("1", "50.00")]


def test_all_cells_failed_names_the_states() -> None:
    frame = frame_from_results([_cell(f"a{s}", {"seed": s}, None) for s in range(2)])
    with pytest.raises(UserInputError) as err:
        build_table(frame, TableSpec(rows=()))
    assert "failed×2" in (err.value.problems[0].allowed or "")


def test_bold_picks_the_minimum_when_lower_is_better() -> None:
    frame = frame_from_results(
        [
            _cell(b, {"baseline": b}, {"eval/len/mean@8": v})
            for b, v in (("grpo", 900.0), ("dapo", 700.0), ("gspo", 800.0))
        ]
    )
    low = build_table(frame, TableSpec(higher_is_better=False)).blocks[0].rows
    high = build_table(frame, TableSpec()).blocks[0].rows
    assert [r.cells[0].bold for r in low] == [False, True, False]
    assert [r.cells[0].bold for r in high] == [True, False, False]


def test_crossing_table_over_other_axes() -> None:
    cells = [
        _cell(f"{c}{g}", {"clip_ratio": c, "group_size": g, "seed": 0}, {"eval/x/mean@1": 0.1 * i})
        for i, (c, g) in enumerate([(0.2, 8), (0.2, 16), ("inf", 8), ("inf", 16)])
    ]
    table = build_table(
        frame_from_results(cells),
        TableSpec(cross=("clip_ratio", "group_size"), metrics="eval/*/mean@1"),
    )
    assert table.label_headers == ("clip_ratio", "group_size")
    assert [r.labels for r in table.blocks[0].rows] == [
        ("0.2", "8"),
        ("0.2", "16"),
        ("inf", "8"),
        ("inf", "16"),
    ]


def test_odd_benchmark_names_in_every_format() -> None:
    names = ["aime/2024", "math_500", "gsm8k@test", "50%&more", "len<4k|hard"]
    names += [f"b{i}" for i in range(12)]
    frame = frame_from_results(
        [
            _cell("a", {"clip": [0.2, 0.28], "seed": 0}, {f"eval/{n}/mean@8": 0.5 for n in names}),
            _cell("b", {"clip": [0.1, 0.1], "seed": 0}, {f"eval/{n}/mean@8": 0.4 for n in names}),
        ]
    )
    table = build_table(frame, TableSpec(rows=("clip",)))
    assert table.columns == (*names, "Average")
    tex = render(table, "latex")
    assert r"math\_500" in tex and r"50\%\&more" in tex and "aime/2024" in tex
    assert r"len\textless{}4k\textbar{}hard" in tex
    # A row starting with "[" right after "\\" would be read as "\\[<length>]".
    assert "\\\\\n[" not in tex and "{}[0.2, 0.28]" in tex
    md = render(table, "markdown")
    assert "| aime/2024 | math_500 | gsm8k@test | 50%&more | len<4k\\|hard |" in md
    head = next(csv.reader(io.StringIO(render(table, "csv"))))
    assert "gsm8k@test" in head and "aime/2024 low" in head
    assert "<th>50%&amp;more</th>" in render(table, "html")


def test_a_label_with_line_breaks_and_escapes_keeps_the_markdown_table_whole() -> None:
    # An axis value is free text: a line break ended the row, ESC reached the terminal.
    hostile = ["a\nb", "c\x1b]0;title\x07", "d\u2028e"]
    frame = frame_from_results([_cell(str(i), {"note": v, "seed": 0}, {"eval/x/mean@8": 0.5})
                                for i, v in enumerate(hostile)])
    md = render(build_table(frame, TableSpec(rows=("note",))), "markdown")
    rows = md.splitlines()
    assert len([r for r in rows if r.startswith("|")]) == 2 + len(hostile), md
    assert all(c.isprintable() for row in rows for c in row), md
    assert "| a\\nb |" in md and "| c\\x1b]0;title\\x07 |" in md and "| d\\u2028e |" in md
    # The plain tables (best trials, convergence) too, and a '|' no longer splits a cell.
    plain = frame_table(pd.DataFrame({"study": ["s|1", "t\nu"], "n": [1, 2]}), "markdown",
                        lambda _c, v: str(v))
    assert plain.splitlines()[2:] == ["| s\\|1 | 1 |", "| t\\nu | 2 |"], plain


def test_many_seeds_delta_is_scipys_paired_t_interval() -> None:
    rng = np.random.default_rng(3)
    base = rng.uniform(0.3, 0.5, 6)
    treat = base + rng.normal(0.02, 0.01, 6)
    cells = [
        _cell(f"{rb}{s}", {"reward_budget": rb, "seed": s}, {"eval/x/mean@8": v})
        for rb, arr in ((False, base), (True, treat))
        for s, v in enumerate(arr)
    ]
    spec = TableSpec(rows=(), delta=DeltaSpec.parse("reward_budget=false"), average=False)
    iv = build_table(frame_from_results(cells), spec).blocks[0].rows[1].cells[0].interval
    diffs = (treat - base) * 100
    assert iv is not None and iv.estimate == pytest.approx(diffs.mean())
    assert (iv.low, iv.high) == pytest.approx(_scipy_t(diffs))


def _scipy_t(diffs: Any) -> tuple[float, float]:
    """The 95% paired t-interval of ``diffs`` as scipy.stats computes it."""
    from scipy import stats

    d = np.asarray(diffs, dtype=float)
    low, high = stats.t.interval(0.95, d.size - 1, loc=d.mean(), scale=stats.sem(d))
    return float(low), float(high)


def test_a_delta_is_marked_wherever_its_interval_excludes_0() -> None:
    from orchestrator.analysis.tables.model import TableCell

    # Two pairs: the t-interval is wide but honest, so its mark needs no minimum of pairs.
    assert TableCell(Interval(2.0, 1.0, 3.0, 2), "delta").significant
    assert TableCell(Interval(-2.0, -3.0, -1.0, 3), "delta").significant
    assert not TableCell(Interval(2.0, -1.0, 3.0, 5), "delta").significant
    assert not TableCell(Interval(2.0, None, None, 1), "delta").significant  # one pair
    assert not TableCell(Interval(2.0, 1.0, 3.0, 3), "absolute").significant
