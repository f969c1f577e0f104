"""The run folder side of stopping: non-finite values in ``metrics.jsonl``, reading
metrics since a cursor, stop requests, and summaries of runs ended from outside."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from orchestrator.backends.embedded.backend import EmbeddedBackend
from orchestrator.backends.embedded.metrics import RunFiles
from orchestrator.runs.metrics import (
    MetricsCursor,
    metric_curves,
    read_metrics_file,
    truncate_metrics,
)
from orchestrator.runs.stop_request import (
    StopRequest,
    clear_stop_request,
    read_stop_request,
    synthesize_summary,
    write_stop_request,
)


@pytest.fixture(autouse=True)
def no_mlflow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)


def test_nonfinite_values_are_kept_apart_and_readers_are_unaffected(tmp_path: Path) -> None:
    files = RunFiles(tmp_path, total_steps=3)
    files.log(1, {"actor/pg_loss": 0.5, "actor/entropy": 1.0})
    files.log(2, {"actor/pg_loss": math.nan, "actor/entropy": math.inf, "ok": 2.0})
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert lines[0] == {"step": 1, "metrics": {"actor/pg_loss": 0.5, "actor/entropy": 1.0}}
    assert lines[1] == {"step": 2, "metrics": {"ok": 2.0},
                        "nonfinite": {"actor/pg_loss": "nan", "actor/entropy": "inf"}}
    # Readers of "metrics" (analysis, the outbox) see numbers only.
    assert metric_curves(tmp_path / "metrics.jsonl") == {
        "actor/pg_loss": {1: 0.5}, "actor/entropy": {1: 1.0}, "ok": {2: 2.0}}
    # The stopping rules' reader sees the non-finite values too.
    rows = EmbeddedBackend().read_metrics(tmp_path).rows
    assert rows[1][0] == 2 and math.isnan(rows[1][1]["actor/pg_loss"])
    assert rows[1][1]["actor/entropy"] == math.inf


def test_metrics_are_read_since_the_cursor(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "metrics": {"a": 1}}\n{"step": 2, "metr')  # half a line
    first = read_metrics_file(path)
    assert [s for s, _ in first.rows] == [1] and not first.restarted
    with path.open("a") as fh:
        fh.write('ics": {"a": 2}}\nnot json\n{"step": 3, "metrics": {"a": 3}}\n')
    second = read_metrics_file(path, first.cursor)
    assert [s for s, _ in second.rows] == [2, 3] and not second.restarted
    assert read_metrics_file(path, second.cursor).rows == ()
    assert read_metrics_file(tmp_path / "missing.jsonl").rows == ()


def test_a_rewritten_file_is_read_again_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": s, "metrics": {"a": s}}) + "\n"
                            for s in range(1, 6)))
    read = read_metrics_file(path)
    truncate_metrics(path, 2)  # a resume from step 2: replaced atomically, shorter
    again = read_metrics_file(path, read.cursor)
    assert again.restarted and [s for s, _ in again.rows] == [1, 2]
    # Shortened in place (same file): also a restart.
    cursor = MetricsCursor(again.cursor.file, again.cursor.offset + 100)
    assert read_metrics_file(path, cursor).restarted


def test_a_stop_request_is_written_atomically_and_read_back(tmp_path: Path) -> None:
    assert read_stop_request(tmp_path) is None
    request = StopRequest("diverged", 12, "diverged at step 12 (x)", "failed")
    write_stop_request(tmp_path, request)
    assert read_stop_request(tmp_path) == request
    assert [p.name for p in tmp_path.iterdir()] == ["stop-request.json"]  # no temp left
    (tmp_path / "stop-request.json").write_text('{"rule": "x", "step": "soon"}')
    assert read_stop_request(tmp_path) is None  # not a request: ignored, not a crash
    clear_stop_request(tmp_path)
    clear_stop_request(tmp_path)
    assert not (tmp_path / "stop-request.json").exists()
    assert StopRequest.from_json({"rule": "p", "step": 1, "reason": "r",
                                  "outcome": "maybe"}) is None


def test_a_summary_is_synthesized_from_the_last_metrics(tmp_path: Path) -> None:
    files = RunFiles(tmp_path, total_steps=10)
    files.log(1, {"a": 1.0, "b": 5.0})
    files.log(2, {"a": 2.0, "b": math.nan})
    request = StopRequest("threshold", 2, "threshold at step 2 (a = 2 >= 2)")
    summary = synthesize_summary(tmp_path, request, None)
    assert summary == json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["steps"] == 2
    assert summary["final"] == {"a": 2.0, "b": 5.0}  # the last finite value of each
    assert summary["stopped"] == {**request.as_json(), "at_step": 2}
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_verl_logs_keep_nan_for_the_rules(tmp_path: Path) -> None:
    from orchestrator.backends.verl.backend import VerlBackend

    logs = tmp_path / "verl_logs"
    logs.mkdir()
    # verl's file logger writes Python's json: NaN as a bare token.
    (logs / "0-train-000.jsonl").write_text(
        '{"step": 1, "data": {"actor/pg_loss": 0.3}}\n'
        '{"step": 2, "data": {"actor/pg_loss": NaN}}\n')
    backend = VerlBackend()
    read = backend.read_metrics(tmp_path)
    assert [s for s, _ in read.rows] == [1, 2] and math.isnan(read.rows[1][1]["actor/pg_loss"])
    (logs / "0-train-001.jsonl").write_text('{"step": 2, "data": {"actor/pg_loss": 0.2}}\n')
    later = backend.read_metrics(tmp_path, read.cursor)  # a relaunch's new file only
    assert later.rows == ((2, {"actor/pg_loss": 0.2}),)
    summary = backend.stopped_summary(tmp_path, StopRequest("plateau", 2, "plateau at step 2"))
    assert summary["steps"] == 2 and summary["final"] == {"actor/pg_loss": 0.2}
