"""Preflight composes cells with verl's real Hydra config and checks names verl defers.

One compose worker per test process (it imports verl once, ~10-30 s) serves every test:
the ``preflight_session`` fixture (conftest.py). The default run composes a representative
subset; every baseline ± RB is composed in the slow run.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from verl_test_cells import BASELINES, cell

import orchestrator.backends.verl.preflight as pf
from orchestrator.backends import get_backend
from orchestrator.backends.verl.settings import VerlSettings
from orchestrator.errors import UserInputError

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("verl") is None,
                                 reason="verl is not installed"),
              pytest.mark.usefixtures("preflight_home")]


def _problems(**settings: object) -> list[tuple[str, str]]:
    with pytest.raises(UserInputError) as info:
        pf.preflight({"cell-a": cell(**settings)})
    return [(p.location, p.found or "") for p in info.value.problems]


def _paper_variants() -> dict[str, VerlSettings]:
    return {
        "no-clip": cell(clip_ratio="inf", reward_type="random", group_size=16,
                        prompts_per_step=128, ppo_mini_batch_size=64),
        "kappa": cell(baseline="drgrpo", reward_correct=5.0, kl_coef=0.001),
        "entropy": cell(entropy_intervention="entropy_reward", intervention_steps=500,
                        eval_files=["/b/aime24.parquet"]),
    }


def test_representative_cells_compose() -> None:
    """RB with GRPO's KL loss; DAPO's reward manager and filter; a two-phase cell + eval."""
    cells = {"grpo+rb": cell(baseline="grpo", reward_budget=True),
             "dapo": cell(baseline="dapo"),
             "entropy": _paper_variants()["entropy"]}
    pf.preflight(cells)  # raises on any problem
    facts = pf._get_worker().plugin_facts  # the worker ran kappa_verl.check() first
    assert (facts["estimator"], facts["verl_version"]) == ("reward_budget", "0.9.1")


@pytest.mark.slow
def test_every_baseline_and_paper_variant_composes() -> None:
    cells: dict[str, VerlSettings] = {
        f"{b}{'+rb' if rb else ''}": cell(baseline=b, reward_budget=rb)
        for b in BASELINES for rb in (False, True)}
    pf.preflight(cells | _paper_variants())  # raises on any problem


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


def test_backend_preflight_of_validated_settings_exits_as_user_error() -> None:
    settings = dict(model_path="m", train_files="/t", val_files="/v",
                    extra_overrides=["trainer.no_such_key=1"])
    backend = get_backend("verl")
    model = backend.validate(settings)  # parsing alone: verl is not asked
    with pytest.raises(UserInputError) as info:
        backend.preflight({"": model})
    assert info.value.exit_code == 2
    assert info.value.problems[0].location == "extra_overrides"


WARM_PROBE = """
import sys
import orchestrator.backends.verl.preflight as pf
from orchestrator.backends.verl.settings import VerlSettings
cells = {"a": VerlSettings.model_validate_json(sys.argv[1]),
         "b": VerlSettings.model_validate_json(sys.argv[2])}
pf.preflight(cells)
print(pf._worker is None, "verl" in sys.modules)
"""


def test_warm_cache_needs_no_worker(preflight_home: Path) -> None:
    cells = {"a": cell(), "b": cell(baseline="dapo", reward_budget=True)}
    pf.preflight(cells)  # fills the cache (this process's worker, if not cached already)
    assert list((preflight_home / "cache" / "verl-preflight").glob("*.json"))
    # A fresh process answers from the disk cache alone: no worker, no verl import.
    out = subprocess.run([sys.executable, "-c", WARM_PROBE, cells["a"].model_dump_json(),
                          cells["b"].model_dump_json()], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["True", "False"]


def test_a_worker_that_dies_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.errors import KappaError

    # A stand-in interpreter that fails the way a broken verl install does.
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ImportError: cannot import name flash_attn' >&2\n"
                      "exit 3\n")
    broken.chmod(0o755)
    monkeypatch.setattr(pf.sys, "executable", str(broken))
    with pytest.raises(KappaError, match=r"exited \(3\)[\s\S]*cannot import name flash_attn"):
        pf.ComposeWorker()
