"""``kappa export/table/convergence`` on a sweep unlike the toy one (clip ratio with ``inf``)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import pytest
import typer
from kit.synthetic import write_run_folders
from typer.testing import CliRunner

from orchestrator.analysis.frame import CellResult
from orchestrator.analysis.sources import cell_from_run_folder
from orchestrator.errors import UserInputError

METRIC = "eval/math500@v2/mean@1"


@pytest.fixture
def app(results_app: Callable[[Sequence[CellResult], int], typer.Typer]) -> typer.Typer:
    cells = []
    for i, clip in enumerate([0.2, 0.1, "inf"]):
        for seed in range(2):
            ok = (clip, seed) != ("inf", 1)
            cells.append(
                CellResult(
                    "sp",
                    f"c{i}{seed}",
                    "succeeded" if ok else "failed",
                    {"clip_ratio": clip, "seed": seed, "clip_pair": [0.2, 0.28]},
                    {METRIC: 0.5 + 0.01 * i + 0.001 * seed} if ok else {},
                )
            )
    return results_app(cells, 20)


def _run(app: typer.Typer, *args: str) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _user_error(app: typer.Typer, *args: str) -> UserInputError:
    result = CliRunner().invoke(app, list(args))
    assert isinstance(result.exception, UserInputError), result.output
    return result.exception


def test_export_round_trips_mixed_axes_and_missing_metrics(
    app: typer.Typer, tmp_path: Path
) -> None:
    rows = json.loads(_run(app, "export", "sp", "--format", "json"))
    assert [r["axis.clip_ratio"] for r in rows] == [0.2, 0.2, 0.1, 0.1, "inf", "inf"]
    assert rows[0]["axis.clip_pair"] == [0.2, 0.28] and rows[-1][f"metric.{METRIC}"] is None
    back = pd.read_csv(io.StringIO(_run(app, "export", "sp", "--format", "csv")))
    assert back[f"metric.{METRIC}"].tolist()[:5] == pytest.approx([0.5, 0.501, 0.51, 0.511, 0.52])
    assert back["state"].tolist()[-1] == "failed"
    out = tmp_path / "r.parquet"
    _run(app, "export", "sp", "--format", "parquet", "-o", str(out))
    parquet = pd.read_parquet(out)
    assert parquet["axis.clip_ratio"].tolist() == ["0.2", "0.2", "0.1", "0.1", "inf", "inf"]
    assert parquet[f"metric.{METRIC}"].isna().tolist() == [False] * 5 + [True]


def test_table_with_a_non_boolean_delta_and_lower_is_better(app: typer.Typer) -> None:
    md = _run(
        app, "table", "sp", "--rows", "", "--delta", "clip_ratio=0.2", "--metrics", "eval/*/*"
    )
    lines = md.splitlines()
    assert lines[0] == "| clip_ratio | n | math500@v2/mean@1 | Average |"
    assert lines[2].startswith("| 0.2 | 2 |")
    assert lines[4].startswith("| + clip_ratio=inf | 1/2 | **+2.00** |")
    low = _run(
        app, "table", "sp", "--rows", "clip_ratio", "--metrics", "eval/*/*", "--better", "lower"
    )
    assert "| 0.2 | 2 | **50.05 ± 0.64** |" in low


def test_table_options_fail_with_the_known_names(app: typer.Typer) -> None:
    err = _user_error(app, "table", "sp", "--rows", "clip_ratio", "--better", "smaller")
    assert "higher, lower" in err.render()
    err = _user_error(app, "table", "sp", "--rows", "clip_ratio", "--format", "xlsx")
    assert "csv, html, latex, markdown" in err.render()
    err = _user_error(app, "table", "sp", "--rows", "clip", "--metrics", "eval/*/*")
    assert err.problems[0].allowed == "clip_ratio, seed, clip_pair"
    err = _user_error(app, "table", "sp", "--rows", "clip_ratio", "--metrics", "eval/*/mean@8")
    assert err.problems[0].allowed == METRIC
    err = _user_error(
        app,
        "table",
        "sp",
        "--rows",
        "clip_ratio",
        "--metrics",
        "eval/*/*",
        "--where",
        "clip_ratio=0.3",
    )
    assert err.problems[0].allowed == "0.2, 0.1, inf"


def test_convergence_with_an_unknown_curve_lists_the_logged_ones(app: typer.Typer) -> None:
    err = _user_error(app, "convergence", "sp", "--metric", "val/*/acc")
    assert "val-core/arith/acc/mean@1" in (err.problems[0].allowed or "")
    text = _run(app, "convergence", "sp")
    row = text.splitlines()[2].split(" | ")
    assert len(row[-1].rstrip(" |").split(".")[1]) == 4  # last value to 4 decimals


def test_a_summary_with_null_or_text_metrics_reads_the_numbers(tmp_path: Path) -> None:
    run_dir = tmp_path / "c1"
    run_dir.mkdir()
    final = {"eval/x/mean@8": 0.5, "eval/y/mean@8": None, "eval/z/mean@8": "n/a"}
    (run_dir / "summary.json").write_text(json.dumps({"status": "succeeded", "final": final}))
    cell = cell_from_run_folder("s", run_dir)
    assert dict(cell.final_metrics) == {"eval/x/mean@8": 0.5}


def test_json_export_keeps_an_infinite_axis_value(app: typer.Typer, tmp_path: Path) -> None:
    cells = [
        CellResult(
            "inf-sweep", f"c{i}", "succeeded", {"clip_ratio": clip, "seed": 0}, {METRIC: 0.5}
        )
        for i, clip in enumerate([0.2, float("inf")])
    ]
    write_run_folders(tmp_path / "runs", cells, steps=10)
    rows = json.loads(_run(app, "export", "inf-sweep", "--format", "json"))
    assert [r["axis.clip_ratio"] for r in rows] == [0.2, "inf"]  # not null (= missing)


def test_default_columns_follow_what_the_runs_logged(app: typer.Typer, tmp_path: Path) -> None:
    # This sweep evaluated with k = 1 (not the toy's 8): the default finds it.
    md = _run(app, "table", "sp", "--rows", "clip_ratio")
    assert md.splitlines()[0] == "| clip_ratio | n | math500@v2 | Average |"
    from kit.synthetic import synthetic_cells

    write_run_folders(tmp_path / "runs", synthetic_cells("k4", seeds=(0,), k=4,
                                                         benchmarks=("a", "b")), steps=5)
    # No layout options: laid out like the report's main table (the README's tour, docs/results.md).
    lines = _run(app, "table", "k4").splitlines()
    assert lines[0] == "| Method | n | a | b | Average |"
    assert "| GRPO | 1 |" in "\n".join(lines) and lines[3].startswith("| + RB | 1 |")
