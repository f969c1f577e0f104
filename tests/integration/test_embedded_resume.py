"""Kill-and-resume: a run killed (SIGKILL) after its first checkpoint and rerun in the same
folder ends with exactly the metrics of an uninterrupted run with the same seed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

CONFIG: dict[str, Any] = {
    "task": "addition",
    "model": {"d_model": 32, "n_layers": 1, "n_heads": 2},
    "warm_start": {"steps": 20, "target_accuracy": None},
    # Dynamic sampling plus Clip-Cov's random token draw: the hardest to replay exactly.
    # Spurious rewards give mixed groups even from a barely warm policy, so every step
    # really updates.
    "baseline": "clip_cov", "reward_type": "random",
    "group_size": 4, "prompts_per_step": 8, "ppo_mini_batches": 2, "max_steps": 10,
    "val_every": 3, "val_size": 16, "eval_samples": 2, "checkpoint_every": 2,
    "benchmarks": ["add-val"], "max_response_length": 12,
}
_VOLATILE = ("timing_s/", "perf/")


def _command(config: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "orchestrator", "train", str(config), "--out", str(out)]


def _stable(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.startswith(_VOLATILE)}


def _lines(run: Path) -> list[tuple[int, dict[str, float]]]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], _stable(r["metrics"])) for r in rows]


def _mlflow_history(uri: str, run_id: str) -> dict[str, list[tuple[int, float]]]:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    keys = client.get_run(run_id).data.metrics
    return {k: sorted((m.step, m.value) for m in client.get_metric_history(run_id, k))
            for k in keys if not k.startswith(_VOLATILE)}


def test_kill_and_resume_matches_uninterrupted(tmp_path: Path) -> None:
    """Files and MLflow alike: each run logs into a run of its own, and the killed and
    resumed one ends with exactly the uninterrupted one's metric history."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("resume", artifact_location=str(tmp_path / "art"))
    runs = {name: client.create_run(experiment).info.run_id for name in ("straight", "resumed")}
    env = {**os.environ, "KAPPA_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1",
           "MLFLOW_TRACKING_URI": uri}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))

    straight = tmp_path / "straight"
    log = subprocess.run(_command(config, straight),
                         env={**env, "MLFLOW_RUN_ID": runs["straight"]},
                         check=True, capture_output=True, text=True).stdout
    # Redirected output (a run folder's train.log) gets a line per step while it trains.
    steps = [line.split(" step ")[1].split()[0] for line in log.splitlines()
             if line.startswith("[kappa] ") and " step " in line]
    assert steps == [f"{s}/10" for s in range(11)], log
    assert "score " in log and "entropy " in log and "val acc " in log

    resumed = tmp_path / "resumed"
    env["MLFLOW_RUN_ID"] = runs["resumed"]
    proc = subprocess.Popen(_command(config, resumed), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    first = resumed / "checkpoints" / "step_2.pt"
    try:
        while not first.exists():  # a wait, not a timed assertion
            if proc.poll() is not None:
                pytest.fail(f"run exited ({proc.returncode}) before its first checkpoint")
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (resumed / "summary.json").exists()  # it really died mid-way
    subprocess.run(_command(config, resumed), env=env, check=True, capture_output=True)

    a = json.loads((straight / "summary.json").read_text())
    b = json.loads((resumed / "summary.json").read_text())
    assert a["status"] == b["status"] == "succeeded"
    assert _stable(a["final"]) == _stable(b["final"])
    assert "eval/add-val/mean@2" in a["final"]
    assert _lines(straight) == _lines(resumed)
    progress = json.loads((resumed / "progress.json").read_text())
    assert progress == {"step": 10, "total_steps": 10}
    history = _mlflow_history(uri, runs["straight"])
    assert [s for s, _ in history["critic/score/mean"]] == list(range(1, 11))
    assert _mlflow_history(uri, runs["resumed"]) == history  # nothing doubled, nothing lost


def test_rerun_of_a_finished_folder_is_stable(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.backends.embedded.settings import EmbeddedSettings
    from orchestrator.backends.embedded.trainer import train

    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    settings = EmbeddedSettings(**{**CONFIG, "max_steps": 2, "baseline": "grpo"})
    first = train(settings, tmp_path / "run", progress=False)
    again = train(settings, tmp_path / "run", progress=False)
    assert _stable(first) == _stable(again)
    assert [s for s, _ in _lines(tmp_path / "run")] == [0, 1, 2, 2]  # no duplicate eval line
    # A later phase extends the same run: it resumes from step 2 rather than starting over.
    longer = train(EmbeddedSettings(**{**CONFIG, "max_steps": 4, "baseline": "grpo"}),
                   tmp_path / "run", progress=False)
    steps = [s for s, _ in _lines(tmp_path / "run")]
    assert steps == [0, 1, 2, 3, 4, 4]
    assert "actor/pg_loss" in longer
