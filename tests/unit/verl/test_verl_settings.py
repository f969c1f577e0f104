"""VerlSettings: bad settings are rejected with every problem; bundles resolve as verl runs them."""

from __future__ import annotations

import math

import pytest
from verl_test_cells import BASELINES, cell

from orchestrator.backends import get_backend
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.errors import UserInputError

MINIMAL = dict(model_path="m", train_files="/t.parquet", val_files="/v.parquet")


@pytest.fixture(autouse=True)
def _no_preflight(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("KAPPA_VERL_PREFLIGHT", "off")
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))


@pytest.mark.parametrize(("settings", "needle"), [
    ({"clip_ratio": 0.2, "clip_ratio_low": 0.1}, "not both"),
    ({"clip_ratio": -0.1}, "must be > 0"),
    ({"clip_ratio_c": 1.0}, "clip_ratio_c must be > 1"),
    ({"reward_correct": 0.0, "reward_incorrect": 1.0}, "reward_correct must be greater"),
    ({"prompts_per_step": 32, "ppo_mini_batch_size": 5}, "divisible by ppo_mini_batch_size"),
    ({"group_size": 3, "prompts_per_step": 3, "n_gpus_per_node": 8}, "number of GPUs"),
    ({"tensor_parallel_size": 3}, "tensor_parallel_size"),
    ({"advantage_std": "population"}, "unbiased std"),
    ({"baseline": "dapo", "max_response_length": 1024}, "overlong_buffer"),
    ({"extra_overrides": ["not an override"]}, "not a Hydra override"),
    ({"baseline": "grop"}, "baseline"),
    ({"entropy_coeff": 0.1}, "unknown setting"),
])
def test_bad_settings_are_user_errors(settings: dict[str, object], needle: str) -> None:
    with pytest.raises(UserInputError) as info:
        get_backend("verl").validate(MINIMAL | settings)
    assert needle in info.value.render()


def test_missing_model_and_data_reported_together() -> None:
    with pytest.raises(UserInputError) as info:
        get_backend("verl").validate({})
    locations = {p.location for p in info.value.problems}
    assert {"model_path", "train_files", "val_files"} <= locations


def test_single_paths_become_tuples() -> None:
    s = cell(train_files="/a.parquet", val_files=["/b.parquet", "/c.parquet"])
    assert s.train_files == ("/a.parquet",)
    assert s.val_files == ("/b.parquet", "/c.parquet")


def test_infinite_clip_ratio_lifts_low_high_and_dual_clip() -> None:
    a = cell(clip_ratio="inf").algorithm
    assert (a.clip_ratio_low, a.clip_ratio_high, a.clip_ratio_c) == (math.inf,) * 3
    finite = cell(clip_ratio=0.15).algorithm
    assert (finite.clip_ratio_low, finite.clip_ratio_high, finite.clip_ratio_c) == (0.15, 0.15, 3.0)


def test_kl_coef_switches_the_kl_loss_on_like_embedded() -> None:
    a = cell(baseline="drgrpo", kl_coef=0.005).algorithm
    assert a.use_kl_loss and a.kl_coef == 0.005
    assert not cell(baseline="grpo", use_kl_loss=False).algorithm.use_kl_loss
    assert cell(baseline="grpo").algorithm.kl_coef == 0.001


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize("rb", [False, True])
def test_bundles_agree_with_embedded_where_the_concept_is_shared(baseline: str, rb: bool) -> None:
    verl = cell(baseline=baseline, reward_budget=rb).algorithm
    embedded = EmbeddedSettings(baseline=baseline, reward_budget=rb).algorithm
    assert verl.loss == embedded.loss
    assert verl.loss_agg_mode == embedded.loss_agg_mode
    assert verl.use_kl_loss == embedded.use_kl_loss
    assert verl.kl_coef == embedded.kl_coef
    assert verl.dynamic_sampling == embedded.dynamic_sampling
    assert verl.overlong_penalty == embedded.overlong_penalty
    assert verl.advantage == embedded.advantage
    assert verl.normalise_by_std == embedded.normalise_by_std == (baseline != "drgrpo")


def test_settings_are_frozen() -> None:
    s = cell()
    with pytest.raises(ValueError):
        s.group_size = 16  # type: ignore[misc]
