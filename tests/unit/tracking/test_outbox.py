"""The MLflow outbox: exactly once across interrupted attempts and sends, and outages.

Against a real MLflow SQLite store. Attempts are :class:`RunFiles` objects abandoned
mid-way (what a SIGKILL leaves: the files on disk); the kill tests with real processes
are in tests/integration/test_fault_injection.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.backends.embedded.metrics import RunFiles
from orchestrator.runs.folder import OUTBOX_FILE
from orchestrator.tracking.outbox import Outbox, OutboxSender

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[MlflowClient, str]:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("outbox", artifact_location=str(tmp_path / "art"))
    run_id = client.create_run(experiment).info.run_id
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    return client, run_id


def _attempt(out: Path, start: int, upto: int, checkpoint: int | None) -> RunFiles:
    """One attempt of a deterministic 'trainer': resume after ``checkpoint`` (None: fresh),
    log steps up to ``upto``; the files object is abandoned (a kill) unless closed."""
    files = RunFiles(out, total_steps=40)
    files.resume_from(-1 if checkpoint is None else checkpoint)
    for step in range(start, upto + 1):
        files.log(step, {"loss": 1.0 / (step + 1), "step_x2": 2.0 * step})
    return files


def _steps(client: MlflowClient, run_id: str, key: str) -> Counter[int]:
    return Counter(m.step for m in client.get_metric_history(run_id, key))


def test_steps_redone_by_two_resumes_reach_mlflow_once(
    tmp_path: Path, run: tuple[MlflowClient, str]
) -> None:
    """The issue's case: checkpoint at 20, killed at 35; the resume killed right after
    step 21; the third attempt finishes. Steps 22-35 used to appear twice."""
    client, run_id = run
    out = tmp_path / "cell"
    out.mkdir()
    first = _attempt(out, 0, 35, None)
    first.close(30)
    second = _attempt(out, 21, 21, 20)
    second.close(30)
    third = _attempt(out, 21, 40, 20)
    assert third.close(30)
    seen = (os.environ.get("MLFLOW_RUN_ID"), os.environ.get("MLFLOW_TRACKING_URI"),
            third._sender is not None, sorted(p.name for p in out.iterdir()))
    for key in ("loss", "step_x2"):
        # each step exactly once
        assert _steps(client, run_id, key) == Counter(range(41)), (run_id, seen)
    values = {m.step: m.value for m in client.get_metric_history(run_id, "step_x2")}
    assert values == {s: 2.0 * s for s in range(41)}


class _Flaky:
    """A real client whose calls fail in a pattern: ``before`` raises without sending
    (server away); ``after`` sends, then raises (the answer was lost: a kill or a
    connection reset after the server committed)."""

    def __init__(self, client: MlflowClient, seed: int) -> None:
        self.client = client
        self.rng = random.Random(seed)
        self.calls = 0

    def log_batch(self, run_id: str, **kwargs: Any) -> None:
        self.calls += 1
        roll = self.rng.random()
        if roll < 0.3:
            raise ConnectionError("server away (before)")
        self.client.log_batch(run_id, **kwargs)
        if roll < 0.5:
            raise ConnectionError("answer lost (after)")


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_lost_answers_and_outages_lose_and_double_nothing(
    tmp_path: Path, run: tuple[MlflowClient, str], seed: int
) -> None:
    print(f"seed={seed}")
    client, run_id = run
    outbox = Outbox(tmp_path)
    flaky = _Flaky(client, seed)
    for seq in range(30):
        outbox.put(seq, seq, {"m": float(seq), "n": -float(seq)})
        if flaky.rng.random() < 0.5:
            with contextlib.suppress(ConnectionError):
                outbox.deliver(flaky, run_id)
    for _ in range(200):  # a finisher that keeps trying until the store answers
        try:
            outbox.deliver(flaky, run_id)
            break
        except ConnectionError:
            continue
    assert outbox.sent(run_id) == outbox.length() == 30
    assert _steps(client, run_id, "m") == Counter(range(30))
    assert _steps(client, run_id, "n") == Counter(range(30))


def test_a_redone_record_is_not_queued_again_and_a_cut_line_is_repaired(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path)
    assert outbox.put(0, 0, {"a": 1.0})
    assert outbox.put(1, 1, {"a": 2.0})
    with open(tmp_path / OUTBOX_FILE, "a") as fh:
        fh.write('{"seq": 2, "step": 2, "ts": 1, "metr')  # a kill in the middle of a line
    again = Outbox(tmp_path)
    assert again.length() == 2
    assert not again.put(1, 1, {"a": 99.0})  # a resume redoes record 1: already queued
    assert again.put(2, 2, {"a": 3.0})
    rows = [json.loads(x) for x in (tmp_path / OUTBOX_FILE).read_text().splitlines()]
    assert [(r["seq"], r["metrics"]["a"]) for r in rows] == [(0, 1.0), (1, 2.0), (2, 3.0)]
    with pytest.raises(ValueError, match="cannot queue"):
        again.put(5, 5, {})


def test_a_new_run_gets_the_whole_outbox(tmp_path: Path, run: tuple[MlflowClient, str]) -> None:
    """The ledger names its run: a cell whose run was deleted and remade gets everything."""
    client, run_id = run
    outbox = Outbox(tmp_path)
    for seq in range(3):
        outbox.put(seq, seq, {"v": float(seq)})
    assert outbox.deliver(client, run_id) == 3
    assert outbox.deliver(client, run_id) == 0
    other = client.create_run(client.get_run(run_id).info.experiment_id).info.run_id
    assert outbox.sent(other) == 0 and outbox.length() == 3
    assert outbox.deliver(client, other) == 3
    assert _steps(client, other, "v") == Counter(range(3))


def test_training_goes_on_through_an_outage(tmp_path: Path, run: tuple[MlflowClient, str]) -> None:
    """A sender whose store is away keeps the records and delivers them once it is back."""
    client, run_id = run

    class Away:
        down = True

        def log_batch(self, run_id: str, **kwargs: Any) -> None:
            if self.down:
                raise ConnectionError("connection refused")
            client.log_batch(run_id, **kwargs)

    away = Away()
    outbox = Outbox(tmp_path)
    sender = OutboxSender(outbox, run_id, client=away, max_backoff=0.05)
    for seq in range(50):
        outbox.put(seq, seq, {"x": float(seq)})
        sender.wake()
    assert not sender.close(0.3)  # still away: close gives up, the outbox keeps it all
    assert sender.failures > 0
    assert outbox.sent(run_id) == 0 and outbox.length() == 50
    away.down = False
    assert outbox.deliver(away, run_id) == 50  # the finisher, once the store is back
    assert _steps(client, run_id, "x") == Counter(range(50))
