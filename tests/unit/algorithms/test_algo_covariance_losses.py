"""Clip-Cov and KL-Cov pick the right tokens on a constructed batch
(docs/algorithms.md#policy-losses)."""

from __future__ import annotations

import math

import pytest
import torch

from orchestrator.algorithms.policy_losses import clip_cov_selection, kl_cov_selection, policy_loss

# Six valid tokens plus one padded one. Centred log-probs [1, -1, -1.5, 1.5, 3.5, -3.5]
# around -5 and advantages ±2 (mean 0) give covariances c_t = [2, 2, -3, -3, 7, 7]:
# tokens 0 and 1 lie in (1, 5); 4 and 5 above it. Token 1 (A < 0, ratio 0.5) is already
# clipped by the PPO ratio clip. The padded token would dominate every ranking if counted.
LOGP = [-4.0, -6.0, -6.5, -3.5, -1.5, -8.5, 100.0]
ADV = [2.0, -2.0, 2.0, -2.0, 2.0, -2.0, 50.0]
LOG_RATIO = [0.0, math.log(0.5), 0.0, 0.0, 0.1, 0.0, 0.0]


def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    new = torch.tensor([LOGP], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([LOGP], dtype=torch.float64) - torch.tensor([LOG_RATIO],
                                                                   dtype=torch.float64)
    adv = torch.tensor([ADV], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0]], dtype=torch.bool)
    return old, new, adv, mask


def test_clip_cov_selects_only_unclipped_tokens_inside_the_band() -> None:
    _, new, adv, mask = _batch()
    clipped = torch.zeros_like(mask)
    clipped[0, 1] = True
    chosen = clip_cov_selection(new, adv, mask, clipped, clip_cov_ratio=1.0, clip_cov_lb=1.0,
                                clip_cov_ub=5.0)
    assert torch.nonzero(chosen[0]).flatten().tolist() == [0]
    unclipped = clip_cov_selection(new, adv, mask, torch.zeros_like(mask), clip_cov_ratio=1.0,
                                   clip_cov_lb=1.0, clip_cov_ub=5.0)
    assert torch.nonzero(unclipped[0]).flatten().tolist() == [0, 1]


def test_clip_cov_budget_draws_a_random_candidate_reproducibly() -> None:
    _, new, adv, mask = _batch()
    none_clipped = torch.zeros_like(mask)
    seen = set()
    for seed in range(20):
        picks = [
            clip_cov_selection(new, adv, mask, none_clipped, clip_cov_ratio=1e-4,
                               clip_cov_lb=1.0, clip_cov_ub=5.0,
                               generator=torch.Generator().manual_seed(seed))
            for _ in range(2)
        ]
        assert torch.equal(picks[0], picks[1])  # same seed, same draw
        assert int(picks[0].sum()) == 1  # budget max(1, int(1e-4 * 6)) = 1
        seen.add(int(torch.nonzero(picks[0][0]).item()))
    assert seen == {0, 1}


def test_clip_cov_loss_zeroes_the_selected_token() -> None:
    old, new, adv, mask = _batch()
    loss, metrics = policy_loss("clip_cov", old, new, adv, mask, agg_mode="token-mean",
                                clip_ratio_low=0.2, clip_ratio_high=0.28, clip_cov_ratio=1.0)
    loss.backward()
    ratios = [math.exp(x) for x in LOG_RATIO[:6]]
    per_token = [max(-a * r, -a * min(max(r, 0.8), 1.28)) for a, r in zip(ADV, ratios,
                                                                          strict=False)]
    per_token[0] = 0.0  # the selected token
    assert loss.item() == pytest.approx(sum(per_token) / 6)
    assert new.grad is not None
    assert new.grad[0, 0].item() == 0.0
    assert new.grad[0, 1].item() == 0.0  # ratio-clipped: no gradient either
    assert new.grad[0, 2].item() == pytest.approx(-2.0 / 6)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(1 / 6)  # verl: share selected


def test_kl_cov_selects_top_covariance_tokens_and_adds_abs_kl() -> None:
    old, new, adv, mask = _batch()
    chosen = kl_cov_selection(new, adv, mask, kl_cov_ratio=0.34)  # int(6 * 0.34) = 2
    assert torch.nonzero(chosen[0]).flatten().tolist() == [4, 5]
    loss, metrics = policy_loss("kl_cov", old, new, adv, mask, agg_mode="token-mean",
                                clip_ratio_low=0.2, clip_ratio_high=0.28, kl_cov_ratio=0.34,
                                ppo_kl_coef=1.0)
    loss.backward()
    ratios = [math.exp(x) for x in LOG_RATIO[:6]]
    per_token = [-a * r for a, r in zip(ADV, ratios, strict=False)]  # no clipping in KL-Cov
    per_token[4] += abs(LOG_RATIO[4])
    assert loss.item() == pytest.approx(sum(per_token) / 6)
    assert new.grad is not None
    # Token 4: d/dlogp of (-A·e^x + |x|) with x = 0.1 > 0 is -A·e^x + 1.
    assert new.grad[0, 4].item() == pytest.approx((-2.0 * ratios[4] + 1.0) / 6)
    assert new.grad[0, 1].item() == pytest.approx(2.0 * 0.5 / 6)  # unclipped surrogate
    expected_kl = sum(abs(x) for x in LOG_RATIO[:6]) / 6
    assert metrics["actor/ppo_kl"] == pytest.approx(expected_kl)


def test_kl_cov_selects_at_least_one_token() -> None:
    _, new, adv, mask = _batch()
    assert int(kl_cov_selection(new, adv, mask, kl_cov_ratio=1e-6).sum()) == 1
