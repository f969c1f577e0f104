"""Parity with verl 0.9.1 on inputs the main parity tests do not draw.

Ragged masks with empty and one-token responses and holes, 16-bit and float64 tensors,
one-sided infinite clipping, tiny Clip-Cov/KL-Cov batches, and GRPO on non-binary groups
of several sizes. Two deliberate differences are pinned here too: an all-empty batch
gives loss 0 (verl: NaN) and a group of equal rewards gets advantage exactly 0 (verl:
float rounding of the mean leaves ``±tiny / 1e-6``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("verl")

from verl.trainer.ppo.core_algos import (
    agg_loss,
    compute_grpo_outcome_advantage,
    get_policy_loss_fn,
)
from verl.workers.config import ActorConfig, PolicyLossConfig

from orchestrator.algorithms.advantages import advantages
from orchestrator.algorithms.masking import aggregate
from orchestrator.algorithms.policy_losses import policy_loss

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
LOSS_KEYS = ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio", "ppo_kl_coef")
CASES: dict[str, dict[str, float]] = {
    "vanilla": {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 3.0},
    "gspo": {"clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4, "clip_ratio_c": 10.0},
    "clip_cov": {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_cov_ratio": 0.2,
                 "clip_cov_lb": -5.0, "clip_cov_ub": 5.0},
    "kl_cov": {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "kl_cov_ratio": 0.2,
               "ppo_kl_coef": 1.0},
}


def _ragged(dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(5)
    old = -torch.rand(6, 5, generator=gen) * 3
    new = old + 0.5 * torch.randn(6, 5, generator=gen)
    adv = torch.randn(6, 5, generator=gen)  # per-token, as after any token-level shaping
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0],
                         [1, 0, 1, 0, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.float32)
    return {"old": old.to(dtype), "new": new.to(dtype), "adv": adv.to(dtype),
            "mask": mask.to(dtype)}


def _both(name: str, x: dict[str, torch.Tensor], agg: str, cfg: dict[str, float]) -> tuple[
        tuple[torch.Tensor, dict[str, Any], torch.Tensor], tuple[torch.Tensor, dict[str, Any],
                                                                 torch.Tensor]]:
    loss_kwargs: dict[str, Any] = {k: v for k, v in cfg.items() if k in LOSS_KEYS}
    clip: dict[str, Any] = {k: v for k, v in cfg.items() if k not in LOSS_KEYS}
    config = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1,
                         loss_agg_mode=agg, policy_loss=PolicyLossConfig(loss_mode=name,
                                                                         **loss_kwargs), **clip)
    out = []
    for which in ("verl", "ours"):
        new = x["new"].clone().requires_grad_(True)
        torch.manual_seed(0)  # Clip-Cov's random draw, identical in both
        if which == "verl":
            loss, metrics = get_policy_loss_fn(name)(
                old_log_prob=x["old"], log_prob=new, advantages=x["adv"],
                response_mask=x["mask"], loss_agg_mode=agg, config=config)
        else:
            loss, metrics = policy_loss(name, x["old"], new, x["adv"], x["mask"], agg_mode=agg,
                                        **cfg)
        loss.backward()
        assert new.grad is not None
        out.append((loss.detach(), metrics, new.grad))
    return out[0], out[1]


@pytest.mark.parametrize("agg", AGG_MODES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_ragged_masks_match_verl(name: str, agg: str) -> None:
    verl, ours = _both(name, _ragged(), agg, CASES[name])
    torch.testing.assert_close(ours[0], verl[0], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(ours[2], verl[2], rtol=1e-6, atol=1e-8)
    for key, value in verl[1].items():
        assert ours[1][key] == pytest.approx(float(value), rel=1e-6, abs=1e-7), key


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("agg", AGG_MODES)
@pytest.mark.parametrize("name", ["vanilla", "gspo"])
def test_other_dtypes_match_verl(name: str, agg: str, dtype: torch.dtype) -> None:
    x = _ragged(dtype)
    verl, ours = _both(name, x, agg, CASES[name])
    assert ours[0].dtype == verl[0].dtype
    torch.testing.assert_close(ours[0], verl[0], rtol=0, atol=0)
    # verl's gradient on empty float16 responses is NaN (its 1e-8 underflows: 0/0); ours is
    # 0 there and equal elsewhere.
    present = x["mask"].sum(-1) > 0
    torch.testing.assert_close(ours[2][present], verl[2][present], rtol=0, atol=0)
    assert torch.equal(ours[2][~present], torch.zeros_like(ours[2][~present]))


@pytest.mark.parametrize(("low", "high"), [(math.inf, 0.2), (0.2, math.inf), (1.0, 1.0)])
def test_one_sided_and_wide_clips_match_verl(low: float, high: float) -> None:
    cfg = {"clip_ratio_low": low, "clip_ratio_high": high, "clip_ratio_c": 3.0}
    verl, ours = _both("vanilla", _ragged(), "token-mean", cfg)
    torch.testing.assert_close(ours[0], verl[0])
    torch.testing.assert_close(ours[2], verl[2])


@pytest.mark.parametrize("name", ["clip_cov", "kl_cov"])
def test_single_token_batch_matches_verl(name: str) -> None:
    """Fewer tokens than 1/ratio: both still treat exactly one token specially."""
    x = _ragged()
    x["mask"] = torch.zeros_like(x["mask"])
    x["mask"][2, 0] = 1.0
    cfg = {**CASES[name], "clip_cov_ratio": 2e-4, "kl_cov_ratio": 2e-3}
    cfg = {k: v for k, v in cfg.items() if k in CASES[name]}
    verl, ours = _both(name, x, "token-mean", cfg)
    torch.testing.assert_close(ours[0], verl[0])
    torch.testing.assert_close(ours[2], verl[2])


@pytest.mark.parametrize("name", sorted(CASES))
def test_all_empty_batch_is_zero_where_verl_is_nan(name: str) -> None:
    x = _ragged()
    x["mask"] = torch.zeros_like(x["mask"])
    verl, ours = _both(name, x, "token-mean", CASES[name])
    assert math.isnan(verl[0].item())
    assert ours[0].item() == 0.0 and torch.equal(ours[2], torch.zeros_like(ours[2]))


@pytest.mark.parametrize("g", [2, 3, 16])
@pytest.mark.parametrize("norm_by_std", [True, False])
def test_grpo_on_partial_credit_matches_verl_except_equal_groups(g: int,
                                                                 norm_by_std: bool) -> None:
    gen = torch.Generator().manual_seed(g)
    scores = torch.rand(5, g, generator=gen).round(decimals=1) - 0.3  # partial, negative
    scores[0] = 0.1  # an equal group whose float32 mean is not exactly 0.1
    uids = np.array([f"p{i}" for i in range(5) for _ in range(g)], dtype=object)
    verl_adv, _ = compute_grpo_outcome_advantage(
        token_level_rewards=scores.reshape(-1, 1), response_mask=torch.ones(5 * g, 1),
        index=uids, norm_adv_by_std_in_grpo=norm_by_std)
    ours = advantages("grpo" if norm_by_std else "drgrpo", scores)
    assert torch.equal(ours[0], torch.zeros(g))
    torch.testing.assert_close(ours[1:], verl_adv.reshape(5, g)[1:], rtol=1e-5, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=6),
       st.sampled_from(AGG_MODES), st.integers(min_value=0, max_value=2**16))
def test_aggregate_matches_verl_on_any_ragged_mask(rows: list[list[bool]], agg: str,
                                                   seed: int) -> None:
    mask = torch.tensor(rows, dtype=torch.float32)
    if mask.sum() == 0:
        mask[0, 0] = 1.0  # the all-empty batch is the pinned difference above
    loss_mat = torch.randn(mask.shape, generator=torch.Generator().manual_seed(seed))
    theirs = agg_loss(loss_mat=loss_mat, loss_mask=mask, loss_agg_mode=agg)
    torch.testing.assert_close(aggregate(loss_mat, mask, agg), theirs, rtol=0, atol=0)
