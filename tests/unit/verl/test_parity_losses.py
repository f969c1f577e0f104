"""Parity: kappa's policy losses equal verl 0.9.1's on identical random tensors.

Each case builds one set of ``(old_log_prob, log_prob, advantages, response_mask)``,
calls verl's registered loss with a real ``ActorConfig`` and
``orchestrator.algorithms.policy_losses.policy_loss`` with the same settings, and compares
the loss value, every metric verl reports, and the gradient with respect to ``log_prob``.
Clip-Cov draws tokens at random in both: the global torch seed is set identically
before each call.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

pytest.importorskip("verl")

from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.workers.config import ActorConfig, PolicyLossConfig

from orchestrator.algorithms.policy_losses import policy_loss

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def _inputs(seed: int, bs: int = 16, length: int = 24, spread: float = 0.3) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(bs, length, generator=gen) * 3
    new = old + spread * torch.randn(bs, length, generator=gen)
    adv = torch.randn(bs, 1, generator=gen).expand(bs, length).clone()
    lengths = torch.randint(1, length + 1, (bs,), generator=gen)
    mask = (torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)).float()
    return {"old": old, "new": new, "adv": adv, "mask": mask}


def _run_verl(loss_mode: str, x: dict[str, Any], agg: str, seed: int,
              **cfg: Any) -> tuple[torch.Tensor, dict[str, Any], torch.Tensor]:
    loss_kwargs = {k: cfg.pop(k) for k in list(cfg)
                   if k in ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio",
                            "ppo_kl_coef")}
    config = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1,
                         loss_agg_mode=agg,
                         policy_loss=PolicyLossConfig(loss_mode=loss_mode, **loss_kwargs), **cfg)
    new = x["new"].clone().requires_grad_(True)
    torch.manual_seed(seed)
    loss, metrics = get_policy_loss_fn(loss_mode)(
        old_log_prob=x["old"], log_prob=new, advantages=x["adv"], response_mask=x["mask"],
        loss_agg_mode=agg, config=config,
    )
    loss.backward()
    assert new.grad is not None
    return loss.detach(), metrics, new.grad


def _run_ours(loss_mode: str, x: dict[str, Any], agg: str, seed: int,
              **cfg: Any) -> tuple[torch.Tensor, dict[str, float], torch.Tensor]:
    new = x["new"].clone().requires_grad_(True)
    torch.manual_seed(seed)
    loss, metrics = policy_loss(loss_mode, x["old"], new, x["adv"], x["mask"], agg_mode=agg,
                                **cfg)
    loss.backward()
    assert new.grad is not None
    return loss.detach(), metrics, new.grad


def _assert_parity(loss_mode: str, x: dict[str, Any], agg: str, seed: int = 0,
                   **cfg: Any) -> dict[str, Any]:
    v_loss, v_metrics, v_grad = _run_verl(loss_mode, x, agg, seed, **dict(cfg))
    o_loss, o_metrics, o_grad = _run_ours(loss_mode, x, agg, seed, **cfg)
    torch.testing.assert_close(o_loss, v_loss, rtol=1e-5, atol=1e-7)
    for key, value in v_metrics.items():
        assert key in o_metrics, f"{loss_mode}: verl reports {key}, kappa does not"
        assert o_metrics[key] == pytest.approx(float(value), rel=1e-5, abs=1e-7), key
    torch.testing.assert_close(o_grad, v_grad, rtol=1e-5, atol=1e-8)
    return v_metrics


@pytest.mark.parametrize("agg", AGG_MODES)
@pytest.mark.parametrize(("low", "high"), [(0.2, 0.2), (0.2, 0.28), (0.1, 0.1)])
def test_vanilla_equals_verl(agg: str, low: float, high: float) -> None:
    x = _inputs(seed=1, spread=0.5)
    metrics = _assert_parity("vanilla", x, agg, clip_ratio_low=low, clip_ratio_high=high,
                             clip_ratio_c=3.0)
    assert metrics["actor/pg_clipfrac"] > 0  # the clip binds, so parity is not vacuous


def test_vanilla_dual_clip_binds_and_matches() -> None:
    x = _inputs(seed=2, spread=2.0)
    metrics = _assert_parity("vanilla", x, "token-mean", clip_ratio_low=0.2,
                             clip_ratio_high=0.2, clip_ratio_c=1.5)
    assert metrics["actor/pg_clipfrac_lower"] > 0


@pytest.mark.parametrize("agg", AGG_MODES)
def test_gspo_equals_verl(agg: str) -> None:
    x = _inputs(seed=3, spread=0.01)
    _assert_parity("gspo", x, agg, clip_ratio_low=3e-4, clip_ratio_high=4e-4, clip_ratio_c=10.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clip_cov_equals_verl_under_the_same_seed(seed: int) -> None:
    x = _inputs(seed=10 + seed, bs=32, length=32, spread=0.5)
    metrics = _assert_parity("clip_cov", x, "token-mean", seed=seed, clip_ratio_low=0.2,
                             clip_ratio_high=0.28, clip_cov_ratio=0.05, clip_cov_lb=0.0,
                             clip_cov_ub=5.0)
    assert metrics["actor/pg_clipfrac"] > 0  # some tokens were selected


@pytest.mark.parametrize("agg", AGG_MODES)
def test_kl_cov_equals_verl(agg: str) -> None:
    x = _inputs(seed=4, bs=32, length=32, spread=0.3)
    _assert_parity("kl_cov", x, agg, clip_ratio_low=0.2, clip_ratio_high=0.28,
                   kl_cov_ratio=0.02, ppo_kl_coef=1.0)


def test_kl_cov_selection_changes_the_loss() -> None:
    """Guard: with a bigger coefficient the loss moves, so the parity above is not vacuous."""
    x = _inputs(seed=4, bs=32, length=32, spread=0.3)
    small, _, _ = _run_ours("kl_cov", x, "token-mean", 0, clip_ratio_low=0.2,
                            clip_ratio_high=0.2, kl_cov_ratio=0.02, ppo_kl_coef=0.0)
    big, _, _ = _run_ours("kl_cov", x, "token-mean", 0, clip_ratio_low=0.2,
                          clip_ratio_high=0.2, kl_cov_ratio=0.02, ppo_kl_coef=10.0)
    assert float(big) > float(small)
