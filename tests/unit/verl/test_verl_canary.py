"""A verl cell's canary: two steps at the smallest batch, checkpointed, validation off.

Composed against verl's real config (preflight, CPU) and run through the phase driver
with a fake verl; a real canary needs a GPU node (docs/verl.md, "Canaries").
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
from verl_test_cells import RUN_DIR, cell

from orchestrator.backends import get_backend
from orchestrator.backends.verl.backend import NO_VALIDATION, smallest_batch
from orchestrator.backends.verl.command import phases, verl_command
from orchestrator.backends.verl.settings import VerlSettings


def _canary(settings: VerlSettings) -> VerlSettings:
    raw = settings.model_dump(mode="json", exclude_unset=True)
    return VerlSettings.model_validate(get_backend("verl").canary_settings(raw, settings))


def _args(argv: list[str]) -> dict[str, str]:
    """The last value of every override (verl's Hydra keeps the last one)."""
    return dict(a.split("=", 1) for a in argv[3:])


@pytest.mark.parametrize(("overrides", "expected"), [
    ({}, (1, 1)),  # Table 2: 32 prompts × 8 on 8 GPUs -> 1 prompt × 8, one per GPU
    ({"prompts_per_step": 128, "ppo_mini_batch_size": 64}, (2, 1)),  # 2 mini-batches kept
    ({"group_size": 16, "prompts_per_step": 128, "ppo_mini_batch_size": 64}, (2, 1)),
    ({"group_size": 4}, (2, 2)),  # 4 responses cannot cover 8 GPUs
    ({"ppo_micro_batch_size_per_gpu": 2}, (2, 2)),  # whole micro-batches on every GPU
    ({"n_gpus_per_node": 4, "nnodes": 2, "group_size": 2}, (4, 4)),
])
def test_smallest_batch(overrides: dict[str, object], expected: tuple[int, int]) -> None:
    assert smallest_batch(cell(**overrides)) == expected


def test_canary_is_two_steps_checkpointed_without_validation_or_evaluation() -> None:
    full = cell(eval_files=["/b/aime24.parquet"], extra_overrides=["trainer.test_freq=10"])
    canary = _canary(full)
    assert [(p.start_step, p.end_step, p.evaluation) for p in phases(canary)] == [
        (0, 2, False)]  # no evaluation phase
    argv = verl_command(canary, RUN_DIR)
    assert argv[-2:] == list(NO_VALIDATION)  # after the user's own overrides
    args = _args(argv)
    assert (args["trainer.total_training_steps"], args["trainer.save_freq"]) == ("2", "2")
    assert (args["trainer.test_freq"], args["trainer.val_before_train"]) == ("-1", "False")
    assert (args["data.train_batch_size"],
            args["actor_rollout_ref.actor.ppo_mini_batch_size"]) == ("1", "1")
    # What shapes the run stays: model, data, algorithm, lengths, GPUs, rollout engine.
    for key in ("actor_rollout_ref.model.path", "data.train_files", "data.val_files",
                "algorithm.adv_estimator", "data.max_response_length",
                "trainer.n_gpus_per_node", "actor_rollout_ref.rollout.n",
                "actor_rollout_ref.rollout.tensor_model_parallel_size",
                "reward.custom_reward_function.path"):
        assert args[key] == _args(verl_command(full, RUN_DIR, phase=phases(full)[0]))[key]
    assert _canary(canary) == canary  # a canary's canary is itself


def test_a_two_phase_cell_canaries_in_two_phases() -> None:
    full = cell(entropy_intervention="entropy_reward", entropy_coef=0.01,
                intervention_steps=500, max_steps=1000)
    canary = _canary(full)
    assert [(p.start_step, p.end_step, p.intervention) for p in phases(canary)] == [
        (0, 1, True), (1, 2, False)]


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed")
@pytest.mark.usefixtures("preflight_home")
def test_canaries_of_the_paper_cells_compose_against_verl() -> None:
    backend = get_backend("verl")
    for full in (cell(baseline="grpo", reward_budget=True),
                 cell(baseline="dapo", eval_files=["/b/aime24.parquet"]),
                 cell(clip_ratio="inf", reward_type="random", group_size=16,
                      prompts_per_step=128, ppo_mini_batch_size=64),
                 cell(entropy_intervention="entropy_reward", intervention_steps=500)):
        raw = full.model_dump(mode="json", exclude_unset=True)
        canary = backend.validate(backend.canary_settings(raw, full))
        backend.preflight({"": canary})  # raises on a problem


def test_a_canary_runs_through_the_phase_driver(fake_verl: Path, tmp_path: Path) -> None:
    full = cell(python=str(fake_verl), entropy_intervention="entropy_reward",
                entropy_coef=0.01, intervention_steps=4, max_steps=8, checkpoint_every=4,
                eval_files=["/b/math500.parquet"])
    run_dir = tmp_path / "sweep.canary" / "cell"
    canary, backend = _canary(full), get_backend("verl")
    spec = backend.launch(canary.model_dump(mode="json", exclude_unset=True), run_dir,
                          backend.demand(canary))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    done = subprocess.run(spec.argv, env=env | dict(spec.env) | {
        "KAPPA_VERL_POLL_SECONDS": "0.05"}, check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = [json.loads(x) for x in (run_dir / "calls.jsonl").read_text().splitlines()]
    assert [c["start"] for c in calls] == [0, 1]  # two phases, no evaluation launch
    assert [_args(["", "", "", *c["argv"][2:]])["trainer.total_training_steps"]
            for c in calls] == ["1", "2"]
    assert (run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").read_text() == "2"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["steps"]) == ("succeeded", 2)
