"""Losses, reward transforms, DAPO helpers and diagnostics on degenerate inputs
(docs/algorithms.md).

Empty batches and responses, one-sided infinite clipping, ratios above 1 for KL-Cov,
non-finite padding, integer rewards under entropy shaping, ``-inf`` logits, the over-long
penalty at its boundaries, Φ at its endpoints, and κ_eff fed the wrong kind of flags.
"""

from __future__ import annotations

import math

import pytest
import torch

from orchestrator.algorithms.diagnostics import entropy_from_logits, kappa_eff, skewness_phi
from orchestrator.algorithms.masking import AGG_MODES, aggregate
from orchestrator.algorithms.policy_losses import POLICY_LOSSES, kl_cov_selection, policy_loss
from orchestrator.algorithms.rewards import dynamic_sampling_keep, entropy_reward, overlong_penalty

SETTINGS: dict[str, dict[str, float]] = {
    "vanilla": {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28},
    "gspo": {"clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4},
    "clip_cov": {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_cov_lb": -5.0},
    "kl_cov": {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "kl_cov_ratio": 0.5},
}


@pytest.mark.parametrize("mode", AGG_MODES)
def test_aggregate_of_an_empty_batch_is_zero_with_zero_gradient(mode: str) -> None:
    """verl divides 0 by 0 here; a NaN loss would put NaN into every weight."""
    loss_mat = torch.randn(3, 4, requires_grad=True)
    out = aggregate(loss_mat, torch.zeros(3, 4), mode)
    assert out.item() == 0.0
    out.backward()
    assert loss_mat.grad is not None and torch.equal(loss_mat.grad, torch.zeros(3, 4))
    assert aggregate(torch.zeros(2, 0), torch.zeros(2, 0), mode).item() == 0.0


@pytest.mark.parametrize("mode", AGG_MODES)
@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_every_loss_is_finite_on_an_all_empty_batch(name: str, mode: str) -> None:
    gen = torch.Generator().manual_seed(0)
    old = -torch.rand(4, 5, generator=gen)
    new = (old + 0.3 * torch.randn(4, 5, generator=gen)).requires_grad_(True)
    loss, metrics = policy_loss(name, old, new, torch.tensor([1.0, -1.0, 0.5, -0.5]),
                                torch.zeros(4, 5), agg_mode=mode, **SETTINGS[name])
    assert loss.item() == 0.0
    assert all(math.isfinite(v) for v in metrics.values())
    loss.backward()
    assert new.grad is not None and torch.isfinite(new.grad).all()


def test_aggregate_ragged_masks_with_empty_and_length_one_rows() -> None:
    loss_mat = torch.tensor([[1.0, 2.0, 3.0], [9.0, 9.0, 9.0], [4.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    assert aggregate(loss_mat, mask, "token-mean").item() == pytest.approx(10 / 4)
    # Empty responses are left out of the response mean: (mean 2 + mean 4) / 2.
    assert aggregate(loss_mat, mask, "seq-mean-token-mean").item() == pytest.approx(3.0)
    # (sum 6 + sum 4) / 2 responses / T = 3.
    assert aggregate(loss_mat, mask, "seq-mean-token-sum-norm").item() == pytest.approx(5 / 3)
    assert aggregate(loss_mat, mask, "seq-mean-token-sum-norm",
                     loss_scale_factor=10).item() == pytest.approx(0.5)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="loss_scale_factor"):
            aggregate(loss_mat, mask, "seq-mean-token-sum-norm", loss_scale_factor=bad)


def test_one_sided_infinite_clip() -> None:
    old = torch.zeros(1, 4, dtype=torch.float64)
    new = torch.log(torch.tensor([[2.0, 0.1, 2.0, 0.1]], dtype=torch.float64))
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]], dtype=torch.float64)
    mask = torch.ones(1, 4)
    # No upper bound: A>0 at ρ=2 is not clipped; A<0 at ρ=0.1 is clipped to 0.8.
    loss_up, up = policy_loss("vanilla", old, new, adv, mask, agg_mode="token-mean",
                              clip_ratio_low=0.2, clip_ratio_high=math.inf)
    assert loss_up.item() == pytest.approx((-2.0 - 0.1 + 2.0 + 0.8) / 4)
    assert up["actor/pg_clipfrac"] == pytest.approx(0.25)
    # No lower bound: A<0 at ρ=0.1 stays, A>0 at ρ=2 is clipped to 1.2; dual clip still on.
    loss_low, low = policy_loss("vanilla", old, new, adv, mask, agg_mode="token-mean",
                                clip_ratio_low=math.inf, clip_ratio_high=0.2)
    assert loss_low.item() == pytest.approx((-1.2 - 0.1 + 2.0 + 0.1) / 4)
    assert low["actor/pg_clipfrac"] == pytest.approx(0.25)


def test_kl_cov_ratio_above_one_selects_every_valid_token() -> None:
    logp = torch.tensor([[-1.0, -2.0, -3.0]])
    adv = torch.tensor([[1.0, -1.0, 0.5]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    selected = kl_cov_selection(logp, adv, mask, kl_cov_ratio=5.0)
    assert selected.tolist() == [[True, True, False]]


def test_gspo_ignores_non_finite_log_probs_on_padding() -> None:
    old = torch.tensor([[-1.0, -1.0, -math.inf]])
    new = torch.tensor([[-0.9, -1.1, -math.inf]], requires_grad=True)
    loss, _ = policy_loss("gspo", old, new, torch.tensor([1.0]),
                          torch.tensor([[1.0, 1.0, 0.0]]), agg_mode="seq-mean-token-mean",
                          clip_ratio_low=0.2, clip_ratio_high=0.2)
    assert loss.item() == pytest.approx(-1.0)  # sequence ratio exp(mean(0.1, −0.1)) = 1


@pytest.mark.parametrize("rewards", [torch.tensor([1, 0]), torch.tensor([True, False])])
def test_entropy_reward_on_integer_rewards_keeps_the_fractional_bonus(
        rewards: torch.Tensor) -> None:
    out = entropy_reward(rewards, torch.tensor([0.5, 2.0]), coef=0.01)
    assert out.is_floating_point()
    assert out.tolist() == pytest.approx([1.005, 0.02])


def test_entropy_reward_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="shape"):
        entropy_reward(torch.zeros(2, 4), torch.zeros(8), coef=0.01)


def test_entropy_with_masked_out_vocabulary() -> None:
    logits = torch.tensor([[[0.0, 0.0, -math.inf, -math.inf]]], requires_grad=True)
    ent = entropy_from_logits(logits)
    assert ent.item() == pytest.approx(math.log(2))
    ent.sum().backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_entropy_of_16_bit_logits_is_accurate(dtype: torch.dtype) -> None:
    logits = (torch.randn(4, 6, 50, generator=torch.Generator().manual_seed(1)) * 4).to(dtype)
    ent = entropy_from_logits(logits)
    assert ent.dtype == dtype
    assert torch.equal(ent, entropy_from_logits(logits.float()).to(dtype))


def test_dynamic_sampling_when_every_group_is_filtered_and_on_nan() -> None:
    assert dynamic_sampling_keep(torch.tensor([[1.0, 1.0], [0.0, 0.0]])).tolist() == [False,
                                                                                       False]
    with pytest.raises(ValueError, match="finite"):
        dynamic_sampling_keep(torch.tensor([[math.nan, math.nan], [0.0, 1.0]]))


@pytest.mark.parametrize("factor", [1.0, 0.5])
def test_overlong_penalty_boundaries(factor: float) -> None:
    # max 20, cache 4: free up to 16 tokens, −factor/4 per token after, −factor from 20 on.
    out = overlong_penalty(torch.tensor([0, 16, 17, 19, 20, 21, 64]), 20, 4, factor).tolist()
    assert out == pytest.approx([0, 0, -factor / 4, -3 * factor / 4, -factor, -factor,
                                 -factor])
    assert math.copysign(1.0, out[1]) == 1.0  # a plain 0 within the budget, not −0.0
    with pytest.raises(ValueError, match="penalty_factor"):
        overlong_penalty(torch.tensor([20]), 20, 4, -1.0)


def test_skewness_phi_endpoints_and_domain() -> None:
    assert skewness_phi(0.0) == skewness_phi(1.0) == -math.inf
    ends = skewness_phi(torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64))
    assert ends.tolist() == [-math.inf, -math.inf, 1.0]
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            skewness_phi(bad)
    with pytest.raises(ValueError):
        skewness_phi(torch.tensor([0.5, 1.2]))


def test_kappa_eff_rejects_rewards_in_place_of_flags() -> None:
    """With r⁻ = −1 every response would count as correct and κ_eff would be None."""
    new = torch.tensor([1.0, 0.0, 2.0])
    old = torch.zeros(3)
    group = torch.tensor([0, 0, 0])
    assert kappa_eff(new, old, torch.tensor([1.0, 0.0, 0.0]), group) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="0/1"):
        kappa_eff(new, old, torch.tensor([1.0, -1.0, -1.0]), group)
    with pytest.raises(ValueError, match=r"\(N,\)"):
        kappa_eff(new, old, torch.tensor([True, False]), group)
