"""verl_command: golden argv per baseline ± RB, and the rules each override follows.

Regenerate the golden files with ``KAPPA_REGEN_GOLDEN=1 pytest tests/unit/verl``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from verl_test_cells import BASELINES, REWARD_FILE, RUN_DIR, cell

from orchestrator.backends.verl.command import (
    ENV_PREFIX,
    hydra_value,
    phases,
    reward_function_path,
    verl_command,
)

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "verl"
FORWARD = {"MLFLOW_TRACKING_URI": "http://mlflow:5000", "MLFLOW_RUN_ID": "0123abcd"}


def _args(argv: list[str]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in argv[3:])


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize("rb", [False, True])
def test_golden_command(baseline: str, rb: bool) -> None:
    argv = verl_command(cell(baseline=baseline, reward_budget=rb), RUN_DIR, forward_env=FORWARD)
    _check_golden(argv, f"{baseline}{'_rb' if rb else ''}")


def _check_golden(argv: list[str], name: str) -> None:
    text = "\n".join(argv) + "\n"
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("KAPPA_REGEN_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing; run with KAPPA_REGEN_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} changed; review, then KAPPA_REGEN_GOLDEN=1"


@pytest.mark.parametrize("intervention", ["entropy_loss", "entropy_reward"])
def test_golden_entropy_study_phases(intervention: str) -> None:
    """The entropy study's intervention cells (experiments/paper/entropy_study.yaml), per phase."""
    s = cell(entropy_intervention=intervention, entropy_coef=0.01, intervention_steps=500,
             max_steps=1000, checkpoint_every=50)
    for phase in phases(s):
        _check_golden(verl_command(s, RUN_DIR, phase=phase, forward_env=FORWARD),
                      f"entropy_study_{intervention}_{phase.name}")


def test_argv_is_a_list_of_words_for_main_ppo() -> None:
    argv = verl_command(cell(), RUN_DIR)
    assert argv[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    assert all(isinstance(a, str) and "=" in a for a in argv[3:])
    keys = [a.split("=", 1)[0] for a in argv[3:]]
    assert len(keys) == len(set(keys)), "an override is given twice"


@pytest.mark.parametrize(("baseline", "expect"), [
    ("grpo", {"algorithm.adv_estimator": "grpo", "actor_rollout_ref.actor.use_kl_loss": "True",
              "actor_rollout_ref.actor.kl_loss_coef": "0.001",
              "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
              "algorithm.use_kl_in_reward": "False"}),
    ("drgrpo", {"algorithm.norm_adv_by_std_in_grpo": "False",
                "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-sum-norm",
                "actor_rollout_ref.actor.use_kl_loss": "False"}),
    ("gspo", {"actor_rollout_ref.actor.policy_loss.loss_mode": "gspo",
              "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-mean",
              "actor_rollout_ref.actor.clip_ratio_low": "0.0003",
              "actor_rollout_ref.actor.clip_ratio_high": "0.0004"}),
    ("dapo", {"actor_rollout_ref.actor.clip_ratio_high": "0.28",
              "algorithm.filter_groups.enable": "True", "algorithm.filter_groups.metric": "acc",
              "reward.reward_manager.name": "dapo",
              "+reward.reward_kwargs.overlong_buffer_cfg.len": "4096",
              "+reward.reward_kwargs.max_resp_len": "8192"}),
    ("clip_cov", {"actor_rollout_ref.actor.policy_loss.loss_mode": "clip_cov",
                  "actor_rollout_ref.actor.policy_loss.clip_cov_ratio": "0.0002"}),
    ("kl_cov", {"actor_rollout_ref.actor.policy_loss.loss_mode": "kl_cov",
                "actor_rollout_ref.actor.policy_loss.kl_cov_ratio": "0.002",
                "actor_rollout_ref.actor.policy_loss.ppo_kl_coef": "1.0"}),
])
def test_bundle_recipes_follow_verl_notes(baseline: str, expect: dict[str, str]) -> None:
    args = _args(verl_command(cell(baseline=baseline), RUN_DIR))
    assert {k: args.get(k) for k in expect} == expect


def test_reward_budget_swaps_only_the_estimator() -> None:
    plain = _args(verl_command(cell(baseline="grpo"), RUN_DIR))
    rb = _args(verl_command(cell(baseline="grpo", reward_budget=True), RUN_DIR))
    assert {k for k in plain if plain[k] != rb[k]} == {"algorithm.adv_estimator"}
    assert rb["algorithm.adv_estimator"] == "reward_budget"
    assert rb["actor_rollout_ref.actor.use_kl_loss"] == "True"  # GRPO keeps its KL with RB


def test_rewards_go_through_reward_keys_never_legacy_ones() -> None:
    args = _args(verl_command(cell(reward_type="random", reward_correct=5.0, seed=7), RUN_DIR))
    kw = "+reward.custom_reward_function.reward_kwargs."
    assert args["reward.custom_reward_function.path"] == REWARD_FILE
    assert args["reward.custom_reward_function.name"] == "compute_score"
    assert (args[kw + "reward_type"], args[kw + "reward_correct"], args[kw + "seed"]) == \
        ("random", "5.0", "7")
    assert not any(k.startswith(("custom_reward_function", "reward_model")) for k in args)


def test_infinite_clip_sets_low_high_and_c() -> None:
    args = _args(verl_command(cell(clip_ratio="inf"), RUN_DIR))
    a = "actor_rollout_ref.actor."
    assert [args[a + k] for k in ("clip_ratio_low", "clip_ratio_high", "clip_ratio_c")] == \
        ["1000000000.0"] * 3
    assert a + "clip_ratio" not in args  # verl ignores it while low/high are set


def test_run_folder_names_and_resume() -> None:
    args = _args(verl_command(cell(), Path("relative/sweep-x/cell-y")))
    assert Path(args["trainer.default_local_dir"]).is_absolute()
    assert args["trainer.default_local_dir"].endswith("relative/sweep-x/cell-y/checkpoints")
    assert (args["trainer.project_name"], args["trainer.experiment_name"]) == ("sweep-x", "cell-y")
    assert args["trainer.resume_mode"] == "auto"
    # verl logs to its file only; kappa sends that to MLflow (logs.MetricsFeed).
    assert args["trainer.logger"] == "[console,file]"
    named = _args(verl_command(cell(project_name="p", experiment_name="e"), RUN_DIR))
    assert (named["trainer.project_name"], named["trainer.experiment_name"]) == ("p", "e")


def test_sizes_steps_and_gpus() -> None:
    s = cell(group_size=16, prompts_per_step=128, ppo_mini_batch_size=64, max_steps=300,
             val_every=10, checkpoint_every=25, learning_rate=5e-7, nnodes=2)
    args = _args(verl_command(s, RUN_DIR))
    assert args["actor_rollout_ref.rollout.n"] == "16"
    assert args["data.train_batch_size"] == "128"
    assert args["actor_rollout_ref.actor.ppo_mini_batch_size"] == "64"
    assert args["trainer.total_training_steps"] == "300"
    assert (args["trainer.test_freq"], args["trainer.save_freq"]) == ("10", "25")
    assert args["actor_rollout_ref.actor.optim.lr"] == "5e-07"
    assert (args["trainer.nnodes"], args["trainer.n_gpus_per_node"]) == ("2", "8")


def test_plugin_and_forwarded_env_reach_ray_workers() -> None:
    args = _args(verl_command(cell(), RUN_DIR, forward_env=FORWARD))
    assert args[ENV_PREFIX + "VERL_USE_EXTERNAL_MODULES"] == "kappa_verl"
    assert args[ENV_PREFIX + "MLFLOW_RUN_ID"] == "0123abcd"
    assert args[ENV_PREFIX + "MLFLOW_TRACKING_URI"] == "http://mlflow:5000"


def test_extra_overrides_come_last_verbatim() -> None:
    extra = ("actor_rollout_ref.actor.grad_clip=0.5", "+trainer.foo=1")
    argv = verl_command(cell(extra_overrides=extra), RUN_DIR)
    assert tuple(argv[-2:]) == extra


def test_reward_file_is_found_without_importing_verl_or_the_plugin() -> None:
    """find_spec("kappa_verl") reads the package's location without executing it
    (find_spec("kappa_verl.rewards") would import kappa_verl, hence verl and torch)."""
    if importlib.util.find_spec("kappa_verl") is None:
        pytest.skip("kappa_verl is not installed")
    code = ("import sys\n"
            "from orchestrator.backends.verl.command import reward_function_path\n"
            "from orchestrator.backends.verl.settings import VerlSettings\n"
            "print(reward_function_path(VerlSettings(model_path='m', train_files='/t', "
            "val_files='/v')))\n"
            "print(sorted({'kappa_verl', 'verl', 'torch'} & set(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    path_text, imported = out.stdout.splitlines()
    assert imported == "[]"
    path = Path(path_text)
    assert path.is_absolute() and path.parent.name == "kappa_verl" and path.name == "rewards.py"
    assert "def compute_score(" in path.read_text()
    assert reward_function_path(cell(reward_function_path="/x/r.py")) == "/x/r.py"


@pytest.mark.parametrize(("value", "rendered"), [
    (True, "True"), (3, "3"), (1e-6, "1e-06"), ("token-mean", "token-mean"),
    ("/data/x.parquet", "/data/x.parquet"), ("~/data/x y.parquet", "'~/data/x y.parquet'"),
    ("it's", "'it\\'s'"), ("${oc.env:HOME}", "'\\${oc.env:HOME}'"), (["a", "b c"], "[a,'b c']"),
])
def test_hydra_value_quotes_what_needs_quoting(value: object, rendered: str) -> None:
    assert hydra_value(value) == rendered  # type: ignore[arg-type]
