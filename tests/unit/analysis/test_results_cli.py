"""``kappa export/table/convergence`` through typer, on run folders in a tmp KAPPA_HOME."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import pytest
import typer
from kit.synthetic import synthetic_cells
from typer.testing import CliRunner

from orchestrator.analysis.frame import CellResult
from orchestrator.errors import UserInputError


@pytest.fixture
def app(results_app: Callable[[Sequence[CellResult], int], typer.Typer]) -> typer.Typer:
    return results_app(synthetic_cells("toy", baselines=("grpo", "dapo"), seeds=(0, 1),
                                       benchmarks=("arith", "logic")), 30)


def _run(app: typer.Typer, *args: str) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_export_csv_json_parquet(app: typer.Typer, tmp_path: Path) -> None:
    text = _run(app, "export", "toy", "--format", "csv")
    assert text.splitlines()[0].startswith("sweep,cell_id,state,axis.model,axis.baseline")
    rows = json.loads(_run(app, "export", "toy", "--format", "json"))
    assert len(rows) == 8 and rows[0]["axis.reward_budget"] is False
    out = tmp_path / "r.parquet"
    _run(app, "export", "toy", "--format", "parquet", "-o", str(out))
    back = pd.read_parquet(out)
    assert len(back) == 8 and back["axis.seed"].tolist()[:2] == [0, 1]


def test_table_markdown_latex_and_output_file(app: typer.Typer, tmp_path: Path) -> None:
    md = _run(app, "table", "toy", "--delta", "reward_budget=false")
    assert md.splitlines()[0] == "| Method | n | arith | logic | Average |"
    assert "| + RB | 2 |" in md
    out = tmp_path / "t.tex"
    _run(app, "table", "toy", "--delta", "reward_budget=false", "--format", "latex", "-o", str(out))
    assert out.read_text().startswith(r"\begin{tabular}")
    cross = _run(app, "table", "toy", "--cross", "baseline,reward_budget", "--no-ci")
    assert "| GRPO | ✗ | 2 |" in cross and "±" not in cross


def test_table_bad_options_raise_user_errors(app: typer.Typer) -> None:
    runner = CliRunner()
    for args in (
        ["table", "toy", "--delta", "reward_budget"],
        ["table", "toy", "--rows", "nope"],
        ["table", "toy", "--where", "oops"],
        ["table", "toy", "--cross", "a,b", "--delta", "reward_budget=false"],
        ["export", "toy", "--format", "xlsx"],
        ["export", "toy", "--format", "parquet"],
        ["table", "missing-sweep"],
    ):
        result = runner.invoke(app, args)
        assert isinstance(result.exception, UserInputError), (args, result.output)


def test_convergence_command(app: typer.Typer) -> None:
    text = _run(app, "convergence", "toy")
    lines = text.splitlines()
    assert lines[0].startswith("| cell_id | state | model | baseline | reward_budget | seed |")
    assert len(lines) == 2 + 8
    csv_text = _run(app, "convergence", "toy", "--format", "csv")
    assert csv_text.splitlines()[0].endswith("points,convergence_step,last_value")
