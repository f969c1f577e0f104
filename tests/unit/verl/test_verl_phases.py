"""Phases: an early-ending intervention splits a cell into launches that resume."""

from __future__ import annotations

from pathlib import Path

import pytest
from verl_test_cells import RUN_DIR, cell

from orchestrator.backends.verl.command import (
    ENV_PREFIX,
    TRACKER_FILE,
    Phase,
    checkpoint_dir,
    pending_phases,
    phases,
    verl_command,
)


def _args(argv: list[str]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in argv[3:])


def test_no_intervention_is_one_phase() -> None:
    assert phases(cell(max_steps=1000)) == [Phase(0, "run", 0, 1000, intervention=False)]


def test_intervention_for_the_whole_run_is_one_phase() -> None:
    assert phases(cell(entropy_intervention="entropy_loss", max_steps=100)) == \
        [Phase(0, "run", 0, 100, intervention=True)]
    assert len(phases(cell(entropy_intervention="entropy_loss", intervention_steps=100,
                           max_steps=100))) == 1


def test_entropy_loss_for_500_then_500_without() -> None:
    s = cell(entropy_intervention="entropy_loss", entropy_coef=0.01, intervention_steps=500,
             max_steps=1000)
    first, second = phases(s)
    a1 = _args(verl_command(s, RUN_DIR, phase=first))
    a2 = _args(verl_command(s, RUN_DIR, phase=second))
    assert (a1["trainer.total_training_steps"], a2["trainer.total_training_steps"]) == \
        ("500", "1000")
    assert (a1["actor_rollout_ref.actor.entropy_coeff"],
            a2["actor_rollout_ref.actor.entropy_coeff"]) == ("0.01", "0.0")
    assert (a1["trainer.val_before_train"], a2["trainer.val_before_train"]) == ("True", "False")
    assert a1["trainer.default_local_dir"] == a2["trainer.default_local_dir"]
    assert a2["trainer.resume_mode"] == "auto"
    # Both phases log to verl's file only; the driver sends it to MLflow.
    assert a1["trainer.logger"] == a2["trainer.logger"] == "[console,file]"
    changed = {k for k in a1 if a1[k] != a2.get(k)}
    assert changed == {"actor_rollout_ref.actor.entropy_coeff", "trainer.total_training_steps",
                       "trainer.val_before_train"}


def test_entropy_reward_env_only_in_the_intervention_phase() -> None:
    s = cell(entropy_intervention="entropy_reward", intervention_steps=500, max_steps=1000)
    first, second = phases(s)
    a1 = _args(verl_command(s, RUN_DIR, phase=first))
    a2 = _args(verl_command(s, RUN_DIR, phase=second))
    assert a1[ENV_PREFIX + "KAPPA_ENTROPY_REWARD_COEF"] == "0.01"
    assert a1[ENV_PREFIX + "KAPPA_ENTROPY_REWARD_STEPS"] == "500"
    # Explicitly off afterwards: a Ray job's runtime_env carries the cell's values.
    assert a2[ENV_PREFIX + "KAPPA_ENTROPY_REWARD_COEF"] == "0"
    assert a2[ENV_PREFIX + "KAPPA_ENTROPY_REWARD_STEPS"] == "0"
    assert a1["actor_rollout_ref.actor.entropy_coeff"] == "0.0"


def test_other_cells_never_mention_the_entropy_reward() -> None:
    for s in (cell(), cell(entropy_intervention="entropy_loss", intervention_steps=5,
                           max_steps=10)):
        for phase in phases(s):
            assert not any("KAPPA_ENTROPY" in a for a in verl_command(s, RUN_DIR, phase=phase))


def test_two_phase_cell_needs_a_phase() -> None:
    s = cell(entropy_intervention="entropy_loss", intervention_steps=5, max_steps=10)
    with pytest.raises(ValueError, match="2 phases"):
        verl_command(s, RUN_DIR)


def test_eval_phase_validates_the_final_checkpoint_on_the_benchmarks() -> None:
    s = cell(eval_files=["/b/aime24.parquet", "/b/math500.parquet"], max_steps=50)
    run, evaluation = phases(s)
    assert evaluation.evaluation and evaluation.start_step == evaluation.end_step == 50
    train = _args(verl_command(s, RUN_DIR, phase=run))
    final = _args(verl_command(s, RUN_DIR, phase=evaluation))
    assert train["data.val_files"] == "[/data/val.parquet]"
    assert (train["actor_rollout_ref.rollout.val_kwargs.n"],
            train["actor_rollout_ref.rollout.val_kwargs.do_sample"]) == ("1", "False")
    assert final["data.val_files"] == "[/b/aime24.parquet,/b/math500.parquet]"
    assert (final["trainer.val_only"], final["trainer.val_before_train"]) == ("True", "True")
    assert (final["actor_rollout_ref.rollout.val_kwargs.n"],
            final["actor_rollout_ref.rollout.val_kwargs.temperature"]) == ("8", "0.7")


def test_pending_phases_follow_the_checkpoint_tracker(tmp_path: Path) -> None:
    s = cell(entropy_intervention="entropy_loss", intervention_steps=5, max_steps=10)
    assert [p.index for p in pending_phases(s, tmp_path)] == [0, 1]
    checkpoint_dir(tmp_path).mkdir(parents=True)
    (checkpoint_dir(tmp_path) / TRACKER_FILE).write_text("5")
    assert [p.index for p in pending_phases(s, tmp_path)] == [1]
    (checkpoint_dir(tmp_path) / TRACKER_FILE).write_text("10")
    assert pending_phases(s, tmp_path) == []
