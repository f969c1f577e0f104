"""What a sweep's MLflow parent run gets (pure parts), and that publishing never fails a sweep."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kit.cells import make_cells

from orchestrator.analysis import mlflow_summary
from orchestrator.analysis.mlflow_summary import (
    PublishHook,
    SweepSummary,
    delta_metrics,
    plot_files,
    publish_sweep,
    slug,
    summary_on,
)
from orchestrator.analysis.stats import Interval
from orchestrator.analysis.tables import Table, TableBlock, TableCell, TableRow
from orchestrator.analysis.tables.model import RowKind
from orchestrator.errors import UserInputError
from orchestrator.registry import CellState, Registry


def _row(labels: tuple[str | bool, ...], kind: RowKind, *intervals: Interval | None) -> TableRow:
    return TableRow(labels, kind, "3", tuple(TableCell(iv, kind) for iv in intervals))


def test_delta_rows_become_metrics_named_by_their_base_and_change() -> None:
    table = Table(("Method",), ("arith/val", "Average"), (
        TableBlock("qwen-1.5b", (
            _row(("GRPO",), "absolute", Interval(70.0, 60.0, 80.0, 3), Interval(30, 29, 31, 3)),
            _row(("+ RB",), "delta", Interval(1.5, -0.5, 3.5, 3), None),
            _row(("DAPO",), "absolute", Interval(71.0, None, None, 1), Interval(31, None, None, 1)),
            _row(("+ RB=0.5",), "delta", Interval(-2.0, None, None, 1),
                 Interval(float("nan"), None, None, 1)))),
        TableBlock(None, (_row((False,), "absolute", Interval(1, 0, 2, 2), None),
                          _row(("+ RB",), "delta", Interval(0.25, 0.0, 0.5, 2), None)))), ())
    assert delta_metrics(table) == {
        "delta/qwen-1.5b/GRPO/RB/arith/val": 1.5,
        "delta/qwen-1.5b/GRPO/RB/arith/val/ci_low": -0.5,
        "delta/qwen-1.5b/GRPO/RB/arith/val/ci_high": 3.5,
        # One seed: no interval; a value that is not a number is left out.
        "delta/qwen-1.5b/DAPO/RB:0.5/arith/val": -2.0,
        # Without a block title; a boolean row label as it is written in a spec.
        "delta/false/RB/arith/val": 0.25,
        "delta/false/RB/arith/val/ci_low": 0.0,
        "delta/false/RB/arith/val/ci_high": 0.5,
    }


def test_plots_are_the_reports_svgs_named_by_their_metric() -> None:
    svg = ('<svg xmlns="http://www.w3.org/2000/svg"><g id="run|{m}|True|c1"></g>'
           '<g id="mean|{m}|True|all"></g></svg>')
    report = ("<html><div class='plot'>" + svg.format(m="val-core/*/acc/mean@1") + "</div>"
              "<div class='plot'>" + svg.format(m="actor/entropy") + "</div>"
              "<div class='plot'><svg><path/></svg></div></html>")
    files = plot_files(report)
    assert list(files) == ["plots/val-core-all-acc-mean-1.svg", "plots/actor-entropy.svg",
                           "plots/plot-3.svg"]
    assert files["plots/actor-entropy.svg"].startswith('<svg xmlns="http://www.w3.org/2000/svg">')
    assert slug("Main table (signed deltas vs each baseline)") == "main-table"
    assert slug("((") == "table"


@pytest.mark.parametrize(("value", "on"), [(None, True), ("1", True), ("true", True),
                                           (" FALSE ", False), ("0", False)])
def test_the_switch(value: str | None, on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if value is None:
        monkeypatch.delenv(mlflow_summary.SWITCH, raising=False)
    else:
        monkeypatch.setenv(mlflow_summary.SWITCH, value)
    assert summary_on() is on


def test_a_bad_switch_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(mlflow_summary.SWITCH, "sometimes")
    with pytest.raises(UserInputError) as caught:
        summary_on()
    text = caught.value.render()
    assert "KAPPA_MLFLOW_SUMMARY" in text and "sometimes" in text and "on or off" in text


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A registry holding sweep ``pub`` (with MLflow ids) and its cells; its URL."""
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    with Registry.open(url) as reg:
        reg.upsert_sweep("pub", backend="fake", spec_text="name: pub\n",
                         mlflow_experiment_id="1", mlflow_parent_run_id="p" * 32)
        reg.add_cells("pub", make_cells(2))
    return url


def test_a_store_out_of_reach_is_a_warning_not_an_error(
        stored: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def away(*args: object, **kwargs: object) -> None:
        raise ConnectionRefusedError("no MLflow server at http://127.0.0.1:9")

    attached: list[dict[str, object]] = []
    monkeypatch.setattr(mlflow_summary, "summarize", lambda *a, **k: SweepSummary(
        {"report.html": "<html></html>"}, {"delta/GRPO/RB/Average": 1.0}, "# t", ("seed",),
        "^(a)$"))
    monkeypatch.setattr("orchestrator.tracking.Tracker.publish_sweep", away)
    with caplog.at_level(logging.WARNING):
        line = publish_sweep("pub", stored, patient=False)
    assert line.startswith("MLflow: the results were not attached (ConnectionRefusedError")
    assert "were not attached" in caplog.text
    # Reached: the parent run gets the summary, the cells their names, the experiment its view.
    monkeypatch.setattr("orchestrator.tracking.Tracker.publish_sweep",
                        lambda self, parent, **parts: attached.append({"parent": parent, **parts}))
    line = publish_sweep("pub", stored, patient=False)
    assert "1 delta metrics attached to the parent run of pub" in line, line
    [call] = attached
    assert call["parent"] == "p" * 32 and call["note"] == "# t"
    assert call["names"] == {"c00000000000": "s0", "c00000000001": "s1"}
    [(key, value)] = dict(call["experiment_tags"]).items()  # type: ignore[call-overload]
    assert key.startswith("mlflow.sharedViewState.kappa-") and '"kappa: pub by seed"' in value


def test_the_hook_publishes_once_a_cell_ended_and_never_raises(
        stored: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(mlflow_summary, "publish_sweep",
                        lambda sweep, *a, **k: calls.append(sweep) or "")
    with Registry.open(stored) as reg:
        hook = PublishHook("pub", stored, None)
        hook.on_sweep_end(reg)  # nothing ended under this scheduler (a no-op resubmit)
        hook.on_cell_end(reg, "c00000000000", "FINISHED")
        hook.on_sweep_end(reg)  # no cell has final metrics: no table to show
        cell = reg.get_cell("pub", "c00000000000")
        assert reg.transition(cell, CellState.PENDING, CellState.QUEUED)
        assert reg.start_attempt(cell) is not None
        assert reg.finish_attempt(cell, CellState.SUCCEEDED,
                                  final_metrics={"eval/toy/mean@4": 0.5})
        hook.on_sweep_end(reg)
        assert calls == ["pub"]
        canary = PublishHook("pub.canary", stored, None)
        canary.on_cell_end(reg, "c00000000000", "FINISHED")
        canary.on_sweep_end(reg)
        assert calls == ["pub"]

    class Unreadable:
        def cells(self, sweep: str) -> list[object]:
            raise OSError("disk I/O error")

    broken = PublishHook("pub", stored, None)
    broken.on_cell_end(reg, "c00000000000", "FINISHED")
    broken.on_sweep_end(Unreadable())  # type: ignore[arg-type]  (logged, not raised)
    assert calls == ["pub"]
