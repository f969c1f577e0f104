"""Every baseline, with and without reward budgeting, and each intervention runs a few steps."""

from __future__ import annotations

import json
import math
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from orchestrator.backends.embedded.backend import EmbeddedBackend
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.trainer import train

# A deliberately tiny cell: these tests check the mechanics, not learning.
TINY: dict[str, Any] = {
    "task": "addition",
    "model": {"d_model": 32, "n_layers": 1, "n_heads": 2},
    # Enough warm start that groups have mixed outcomes (DAPO's filter keeps some).
    "warm_start": {"steps": 200, "learning_rate": 1e-2, "target_accuracy": 0.25},
    "group_size": 4, "prompts_per_step": 4, "ppo_mini_batches": 2, "max_steps": 2,
    "val_every": 1, "val_size": 8, "eval_samples": 2, "checkpoint_every": 1,
    "benchmarks": ["add-val"], "max_response_length": 12,
}


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One warm-start cache for the whole module (every cell here shares its warm start)."""
    return tmp_path_factory.mktemp("cache")


def _run(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
         **overrides: Any) -> tuple[dict[str, float], list[dict[str, Any]]]:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KAPPA_CACHE", str(cache))
    settings = EmbeddedSettings(**{**TINY, **overrides})
    final = train(settings, tmp_path / "run", progress=False)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    return final, lines


def _check_common(final: dict[str, float], lines: list[dict[str, Any]]) -> None:
    steps = [x["step"] for x in lines]
    assert steps[:3] == [0, 1, 2]
    for key in ("actor/pg_loss", "actor/entropy", "actor/grad_norm", "critic/score/mean",
                "critic/advantages/mean", "response_length/mean", "timing_s/step",
                "perf/throughput", "eval/add-val/mean@2", "eval/add-val/pass@2",
                "val-core/add-val/acc/mean@1", "eval/add-val/greedy@1"):
        assert key in final and math.isfinite(final[key]), key
    # Only the validation set is reported as val-core; held-out sets are eval/*.
    assert [k for k in final if k.startswith("val-core/")] == ["val-core/add-val/acc/mean@1"]
    # Every name logged is one the backend declares (what stop rules are checked against).
    known = EmbeddedBackend().known_metrics()
    logged = {name for line in lines for name in line["metrics"]}
    assert {n for n in logged if not any(fnmatchcase(n, p) for p in known)} == set()


@pytest.mark.parametrize("reward_budget", [False, True], ids=["plain", "rb"])
@pytest.mark.parametrize("baseline", ["grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov"])
def test_baseline_runs(baseline: str, reward_budget: bool, tmp_path: Path, shared_cache: Path,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    final, lines = _run(tmp_path, shared_cache, monkeypatch, baseline=baseline,
                        reward_budget=reward_budget)
    _check_common(final, lines)
    settings = EmbeddedSettings(**{**TINY, "baseline": baseline})
    assert ("actor/kl_loss" in final) == settings.algorithm.use_kl_loss
    step1 = lines[1]["metrics"]
    if settings.algorithm.dynamic_sampling:
        assert 1 <= step1["batch/num_gen_batches"] <= settings.max_sampling_attempts
    else:
        assert step1["batch/num_gen_batches"] == 1
        assert step1["batch/kept_groups"] == TINY["prompts_per_step"]


@pytest.mark.parametrize("overrides", [
    {"entropy_intervention": "entropy_loss", "entropy_coef": 0.05, "intervention_steps": 1},
    {"entropy_intervention": "entropy_reward", "entropy_coef": 0.05},
    {"reward_type": "random", "baseline": "drgrpo"},
    {"clip_ratio": "inf", "reward_correct": 5.0, "kl_coef": 0.005, "baseline": "drgrpo"},
    {"advantage_std": "population", "ppo_epochs": 2},
], ids=["entropy_loss", "entropy_reward", "random_reward", "no_clip_kappa", "population_std"])
def test_variants_run(overrides: dict[str, Any], tmp_path: Path, shared_cache: Path,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    final, lines = _run(tmp_path, shared_cache, monkeypatch, **overrides)
    _check_common(final, lines)


def test_entropy_reward_shifts_scores(tmp_path: Path, shared_cache: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _, plain = _run(tmp_path / "a", shared_cache, monkeypatch, max_steps=1)
    _, bonus = _run(tmp_path / "b", shared_cache, monkeypatch, max_steps=1,
                    entropy_intervention="entropy_reward", entropy_coef=1.0)
    # Same samples (same seeds), so the score differs by exactly the mean entropy bonus > 0.
    assert bonus[1]["metrics"]["critic/score/mean"] > plain[1]["metrics"]["critic/score/mean"]
    assert bonus[1]["metrics"]["critic/acc/mean"] == plain[1]["metrics"]["critic/acc/mean"]
