"""The phase driver as a real process, with a fake verl that writes verl's files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from verl_test_cells import cell

from orchestrator.backends import get_backend
from orchestrator.backends.verl.settings import VerlSettings


def _launch(settings: VerlSettings, run_dir: Path, **env: str) -> int:
    backend = get_backend("verl")
    spec = backend.launch(settings.model_dump(mode="json", exclude_unset=True), run_dir,
                          backend.demand(settings))
    full = dict(os.environ) | dict(spec.env) | {"KAPPA_VERL_POLL_SECONDS": "0.05"}
    for name in ("MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI"):
        full.pop(name, None)
    full |= env
    return subprocess.run(spec.argv, env=full, cwd=Path.cwd(), check=False,
                          capture_output=True, text=True).returncode


def _calls(run_dir: Path) -> list[dict[str, object]]:
    path = run_dir / "calls.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _steps(run_dir: Path) -> list[int]:
    return [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture
def two_phase(fake_verl: Path) -> VerlSettings:
    return cell(python=str(fake_verl), entropy_intervention="entropy_reward",
                entropy_coef=0.01, intervention_steps=4, max_steps=8, checkpoint_every=2,
                eval_files=["/b/math500.parquet"])


def test_phases_run_in_order_and_fill_the_run_folder(two_phase: VerlSettings,
                                                     tmp_path: Path) -> None:
    run_dir = tmp_path / "sweep" / "cell"
    assert _launch(two_phase, run_dir) == 0
    calls = _calls(run_dir)
    assert [c["start"] for c in calls] == [0, 4, 8]
    assert [c["coef"] for c in calls] == ["0.01", "0", "0"]  # later phases: explicitly off
    assert _steps(run_dir) == list(range(1, 9))
    progress = json.loads((run_dir / "progress.json").read_text())
    assert progress == {"step": 8, "total_steps": 8}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["steps"] == 8
    assert summary["final"]["eval/math500/mean@8"] == 0.5
    assert summary["final"]["critic/score/mean"] == 1.0
    assert "note" not in summary["final"]  # non-numbers are not metrics
    assert get_backend("verl").read_progress(run_dir) == (8, 8)


def test_relaunch_skips_completed_phases(two_phase: VerlSettings, tmp_path: Path) -> None:
    run_dir = tmp_path / "sweep" / "cell"
    assert _launch(two_phase, run_dir, FAKE_VERL_FAIL_AT="7") == 3
    assert not (run_dir / "summary.json").exists()
    assert [c["start"] for c in _calls(run_dir)] == [0, 4]
    assert _launch(two_phase, run_dir) == 0
    # phase 1 is not rerun; phase 2 resumes from the step-6 checkpoint, then the eval
    assert [c["start"] for c in _calls(run_dir)] == [0, 4, 6, 8]
    assert _steps(run_dir) == list(range(1, 9))
    assert _launch(two_phase, run_dir) == 0
    assert len(_calls(run_dir)) == 4  # nothing left to run


def _history(client: Any, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_every_phase_reaches_mlflow_through_the_outbox(two_phase: VerlSettings,
                                                       tmp_path: Path) -> None:
    mlflow = pytest.importorskip("mlflow")
    uri = (tmp_path / "mlruns").as_uri()  # file store: quick to create
    client = mlflow.tracking.MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("x")).info.run_id
    run_dir = tmp_path / "sweep" / "cell"
    assert _launch(two_phase, run_dir, MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id) == 0
    assert "trainer.logger=[console,file]" in _calls(run_dir)[0]["argv"]  # not verl's own
    # Every step of every phase once (the fake's score is step / the phase's last step).
    assert _history(client, run_id, "critic/score/mean") == [
        (s, s / 4 if s <= 4 else s / 8) for s in range(1, 9)]
    assert _history(client, run_id, "val-core/math500/acc/mean_at_8") == [(8, 0.5)]
    assert not client.get_metric_history(run_id, "note")  # not a number: not a metric
    assert client.get_run(run_id).info.status == "RUNNING"  # the scheduler ends runs
    sent = json.loads((run_dir / "mlflow-sent.json").read_text())
    assert sent == {"run_id": run_id, "sent": 9}  # steps 1-8, then the evaluation's line


def test_without_mlflow_variables_nothing_is_queued(two_phase: VerlSettings,
                                                     tmp_path: Path) -> None:
    run_dir = tmp_path / "sweep" / "cell"
    assert _launch(two_phase, run_dir) == 0
    assert not (run_dir / "mlflow-outbox.jsonl").exists()
