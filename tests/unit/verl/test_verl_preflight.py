"""Preflight composes cells with verl's real Hydra config and checks names verl defers.

One compose worker (it imports verl once, ~10-30 s) serves the whole module.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from verl_test_cells import BASELINES, cell

import orchestrator.backends.verl.preflight as pf
from orchestrator.backends import get_backend
from orchestrator.errors import UserInputError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("verl") is None,
                                reason="verl is not installed")


@pytest.fixture(scope="module", autouse=True)
def _kappa_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    saved = {k: os.environ.get(k) for k in ("KAPPA_HOME", "KAPPA_CACHE", "KAPPA_VERL_PREFLIGHT")}
    home = tmp_path_factory.mktemp("kappa_home")
    os.environ["KAPPA_HOME"] = str(home)
    os.environ.pop("KAPPA_CACHE", None)
    os.environ.pop("KAPPA_VERL_PREFLIGHT", None)
    yield home
    pf.close_worker()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _problems(**settings: object) -> list[tuple[str, str]]:
    with pytest.raises(UserInputError) as info:
        pf.preflight({"cell-a": cell(**settings)})
    return [(p.location, p.found or "") for p in info.value.problems]


def test_every_baseline_and_paper_variant_composes() -> None:
    cells = {f"{b}{'+rb' if rb else ''}": cell(baseline=b, reward_budget=rb)
             for b in BASELINES for rb in (False, True)}
    cells["no-clip"] = cell(clip_ratio="inf", reward_type="random", group_size=16,
                            prompts_per_step=128, ppo_mini_batch_size=64)
    cells["kappa"] = cell(baseline="drgrpo", reward_correct=5.0, kl_coef=0.001)
    cells["entropy"] = cell(entropy_intervention="entropy_reward", intervention_steps=500,
                            eval_files=["/b/aime24.parquet"])
    pf.preflight(cells)  # raises on any problem


def test_unknown_estimator_is_caught_before_any_rollout() -> None:
    [(location, found)] = _problems(extra_overrides=["algorithm.adv_estimator=grop"])
    assert location == "cell-a.extra_overrides"
    assert "unknown adv_estimator 'grop'" in found and "did you mean 'grpo'" in found


def test_unknown_loss_mode_is_caught() -> None:
    [(_, found)] = _problems(
        extra_overrides=["actor_rollout_ref.actor.policy_loss.loss_mode=clip-cov"])
    assert "unknown loss_mode 'clip-cov'" in found and "clip_cov" in found


def test_misspelt_override_and_every_other_problem_at_once() -> None:
    problems = _problems(extra_overrides=[
        "actor_rollout_ref.actor.entropy_coef=0.1",  # verl's key is entropy_coeff
        "algorithm.adv_estimator=grop",
        "reward.reward_manager.name=batch",  # not registered in verl 0.9.1's reward loop
    ])
    found = " | ".join(f for _, f in problems)
    assert len(problems) == 3
    assert "Could not override 'actor_rollout_ref.actor.entropy_coef'" in found
    assert "grop" in found and "unknown reward_manager 'batch'" in found


def test_backend_validate_preflights_and_exits_as_user_error() -> None:
    settings = dict(model_path="m", train_files="/t", val_files="/v",
                    extra_overrides=["trainer.no_such_key=1"])
    with pytest.raises(UserInputError) as info:
        get_backend("verl").validate(settings)
    assert info.value.exit_code == 2
    assert info.value.problems[0].location == "extra_overrides"


def test_warm_cache_needs_no_worker(_kappa_home: Path) -> None:
    cells = {"a": cell(), "b": cell(baseline="dapo", reward_budget=True)}
    pf.preflight(cells)
    pf.close_worker()
    pf.preflight(cells)
    assert pf._worker is None  # answered from the disk cache alone
    assert list((_kappa_home / "cache" / "verl-preflight").glob("*.json"))
