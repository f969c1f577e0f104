"""``--out`` (and the older ``--output``/``-o``) on table, export and report; several
sweeps named at once (run folders in a tmp KAPPA_HOME)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import typer
from kit.synthetic import synthetic_cells
from typer.testing import CliRunner

from orchestrator.analysis.frame import CellResult
from orchestrator.errors import UserInputError


@pytest.fixture
def app(results_app: Callable[[Sequence[CellResult], int], typer.Typer]) -> typer.Typer:
    cells = synthetic_cells("toy", baselines=("grpo",), seeds=(0, 1), benchmarks=("arith",))
    cells += synthetic_cells("more", baselines=("grpo",), seeds=(2,), benchmarks=("arith",))
    return results_app(cells, 20)


def _run(app: typer.Typer, *args: str) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("flag", ["--out", "--output", "-o"])
def test_every_output_flag_writes_the_file(app: typer.Typer, tmp_path: Path, flag: str) -> None:
    table = tmp_path / flag.strip("-") / "t.md"
    _run(app, "table", "toy", "--delta", "reward_budget=false", flag, str(table))
    assert table.read_text().startswith("| Method | n |")
    export = tmp_path / flag.strip("-") / "e.json"
    _run(app, "export", "toy", "--format", "json", flag, str(export))
    assert len(json.loads(export.read_text())) == 4


def test_several_sweeps_in_table_export_and_report(app: typer.Typer, tmp_path: Path) -> None:
    text = _run(app, "table", "toy", "more", "--delta", "reward_budget=false")
    assert text.splitlines()[0] == "| Method | Sweep | n | arith | Average |"
    assert "| GRPO | toy, more | 3 |" in text
    rows = json.loads(_run(app, "export", "toy", "more", "--format", "json"))
    assert [r["sweep"] for r in rows] == ["toy"] * 4 + ["more"] * 2
    assert {r["step"] for r in rows} == {20} and "settings_diff" in rows[0]
    report = tmp_path / "both.html"
    _run(app, "report", "toy", "more", "--out", str(report))
    assert "toy + more" in report.read_text()


def test_a_sweep_named_twice_is_refused(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["table", "toy", "toy"])
    assert isinstance(result.exception, UserInputError)
    assert "named twice" in str(result.exception)


def test_a_report_of_one_sweep_is_attached_to_its_mlflow_run(
        app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.analysis import mlflow_summary

    published: list[tuple[str, dict[str, object]]] = []
    original = mlflow_summary.publish_sweep
    monkeypatch.setattr(mlflow_summary, "publish_sweep", lambda sweep, *a, **k: (
        published.append((sweep, k)) or "MLflow: attached"))
    report = tmp_path / "toy.html"
    out = _run(app, "report", "toy", "--compare", "reward_budget", "--out", str(report))
    assert out.splitlines()[-1] == "MLflow: attached"
    [(sweep, options)] = published
    assert sweep == "toy" and options["report_html"] == report.read_text()
    assert options["compare"] == "reward_budget" and options["patient"] is False
    _run(app, "report", "toy", "--no-publish", "--out", str(report))
    _run(app, "report", "toy", "more", "--out", str(report))  # several: no one parent run
    assert len(published) == 1
    # A sweep known from its run folders only (no registry here) has no parent run.
    assert original("toy").endswith("has no MLflow parent run; nothing attached")


def test_the_compared_axis_is_kept_with_the_sweep(
        results_app: Callable[[Sequence[CellResult], int], typer.Typer],
        tmp_path: Path) -> None:
    """``--compare`` is remembered in the sweep's folder: the next report without it, and
    the summary posted to MLflow at the sweep's end, compare the same axis; a refused
    ``--compare`` keeps nothing."""
    from orchestrator.analysis.report import kept_compare

    app = results_app(synthetic_cells("two", baselines=("grpo", "dapo"), seeds=(0, 1),
                                      benchmarks=("arith",)), 20)
    report = tmp_path / "two.html"
    _run(app, "report", "two", "--no-publish", "--out", str(report))
    assert "Compared: <b>reward_budget</b>" in report.read_text()
    assert kept_compare("two") is None  # nothing chosen, nothing kept
    refused = CliRunner().invoke(app, ["report", "two", "--no-publish", "--compare", "seed",
                                       "--out", str(report)])
    assert isinstance(refused.exception, UserInputError) and kept_compare("two") is None
    _run(app, "report", "two", "--no-publish", "--compare", "baseline", "--out", str(report))
    assert kept_compare("two") == "baseline"
    _run(app, "report", "two", "--no-publish", "--out", str(report))
    assert "Compared: <b>baseline</b>" in report.read_text()
    # What the folder holds is not trusted: garbage, another type or an axis that no longer
    # varies is ignored (the default axis), never an error.
    from orchestrator.runs.layout import REPORT_FILE, sweep_folder

    kept = sweep_folder("two") / REPORT_FILE
    for text in ("{not json", "[\"baseline\"]", "{\"compare\": 7}", "{\"compare\": \"lr\"}",
                 "\u2028" * 3):
        kept.write_text(text)
        _run(app, "report", "two", "--no-publish", "--out", str(report))
        assert "Compared: <b>reward_budget</b>" in report.read_text(), text
    kept.unlink()
    kept.mkdir()
    assert kept_compare("two") is None
    # ... and a folder there does not stop a report that asks to keep an axis.
    _run(app, "report", "two", "--no-publish", "--compare", "baseline", "--out", str(report))
    assert "Compared: <b>baseline</b>" in report.read_text()
