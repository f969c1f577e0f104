"""Metrics go into a pre-created MLflow run (real SQLite store), batched through the outbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.trainer import train

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


@pytest.fixture
def handed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[MlflowClient, str, str]:
    """``(client, experiment id, run id)`` of a run pre-created as the orchestrator does,
    and handed to the trainer through the environment."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("embedded", artifact_location=str(tmp_path / "art"))
    run_id = client.create_run(experiment).info.run_id
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    return client, experiment, run_id


def test_metrics_are_batched_into_the_existing_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    handed_run: tuple[MlflowClient, str, str],
) -> None:
    from mlflow.tracking import MlflowClient

    client, experiment, run_id = handed_run
    calls: list[tuple[str, int]] = []
    real_log_batch = MlflowClient.log_batch

    def counting_log_batch(self: MlflowClient, run_id: str, *args: Any, **kwargs: Any) -> Any:
        calls.append((run_id, len(kwargs.get("metrics", ()))))
        return real_log_batch(self, run_id, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", counting_log_batch)
    settings = EmbeddedSettings(
        task="addition", model={"d_model": 32, "n_layers": 1, "n_heads": 2},
        warm_start={"steps": 10, "target_accuracy": None}, group_size=4, prompts_per_step=4,
        max_steps=3, val_every=2, val_size=8, eval_samples=2, benchmarks=("add-val",),
        reward_type="random")
    train(settings, tmp_path / "run", progress=False)

    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    # Step 0 (warm start), steps 1..3, the final evaluation: batched by the outbox's sender
    # (at most one call per line), every metric of every line sent exactly once.
    assert len(lines) == 5
    assert 1 <= len(calls) <= len(lines)
    assert all(rid == run_id for rid, _ in calls)
    assert sum(n for _, n in calls) == sum(len(json.loads(x)["metrics"]) for x in lines)

    history = client.get_metric_history(run_id, "critic/score/mean")
    assert sorted(m.step for m in history) == [1, 2, 3]
    # '@' is not allowed in MLflow names; it becomes '_at_' there (verl does the same).
    assert client.get_metric_history(run_id, "eval/add-val/mean_at_2")
    run = client.get_run(run_id)
    assert run.info.status == "RUNNING"  # the trainer never ends the run it was given
    assert len(client.search_runs([experiment])) == 1  # and never creates one


def test_a_resumed_run_does_not_log_redone_steps_twice(
    tmp_path: Path, handed_run: tuple[MlflowClient, str, str],
) -> None:
    client, _, run_id = handed_run
    settings = EmbeddedSettings(
        task="addition", model={"d_model": 32, "n_layers": 1, "n_heads": 2},
        warm_start={"steps": 10, "target_accuracy": None}, group_size=4, prompts_per_step=4,
        max_steps=4, val_every=2, val_size=8, eval_samples=2, benchmarks=("add-val",),
        checkpoint_every=2)
    out = tmp_path / "run"
    first = train(settings, out, progress=False)
    keys = sorted(client.get_run(run_id).data.metrics)

    def history() -> dict[str, list[tuple[int, float]]]:
        return {key: sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
                for key in keys if not key.startswith(("timing_s/", "perf/"))}

    uninterrupted = history()
    assert [s for s, _ in uninterrupted["critic/score/mean"]] == [1, 2, 3, 4]
    # As if killed after the final evaluation but before the step-4 checkpoint was kept:
    # the resume redoes steps 3 and 4 and the evaluation, all already in MLflow.
    (out / "checkpoints" / "step_4.pt").unlink()
    again = train(settings, out, progress=False)
    assert {k: v for k, v in again.items() if not k.startswith(("timing_s/", "perf/"))} == {
        k: v for k, v in first.items() if not k.startswith(("timing_s/", "perf/"))}
    assert history() == uninterrupted  # nothing drawn twice
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 1, 2, 3, 4, 4]
