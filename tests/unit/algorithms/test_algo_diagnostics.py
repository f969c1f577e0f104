"""Diagnostics: clip fractions, approximate KL, κ_eff and the skewness Φ
(docs/algorithms.md#diagnostics)."""

from __future__ import annotations

import math

import pytest
import torch

from orchestrator.algorithms.diagnostics import clip_fractions, kappa_eff, skewness_phi
from orchestrator.algorithms.policy_losses import policy_loss


def test_clip_fractions_split_sides_and_sum_to_verl_clipfrac() -> None:
    ratios = torch.tensor([[1.1, 1.5, 0.5, 4.0, 2.0, 0.5, 1.5]], dtype=torch.float64)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, -1.0, 1.0, 1.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0]])
    old = torch.zeros_like(ratios)
    new = torch.log(ratios)
    fractions = clip_fractions(old, new, adv, mask, 0.2, 0.28)
    assert fractions.upper == pytest.approx(1 / 6)
    assert fractions.lower == pytest.approx(1 / 6)
    _, metrics = policy_loss("vanilla", old, new, adv, mask, agg_mode="token-mean",
                             clip_ratio_low=0.2, clip_ratio_high=0.28)
    assert fractions.upper + fractions.lower == pytest.approx(metrics["actor/pg_clipfrac"])


def test_kappa_eff_on_a_constructed_batch() -> None:
    # group 0: a(+, Δ0.5), b(−, Δ−0.2), c(−, Δ0.1) -> pairs 0.7, 0.4
    # group 1: d(+, Δ1), e(+, Δ0), f(−, Δ0.5)      -> pairs 0.5, −0.5
    # group 2: all correct                          -> no pair
    delta = torch.tensor([0.5, -0.2, 0.1, 1.0, 0.0, 0.5, 3.0, 3.0])
    old = torch.tensor([-10.0, -12.0, -9.0, -20.0, -5.0, -7.0, -1.0, -2.0])
    correct = torch.tensor([1, 0, 0, 1, 1, 0, 1, 1], dtype=torch.bool)
    group = torch.tensor([0, 0, 0, 5, 5, 5, 9, 9])
    value = kappa_eff(old + delta, old, correct, group)
    assert value == pytest.approx((0.7 + 0.4 + 0.5 - 0.5) / 4)


def test_kappa_eff_without_pairs_is_none() -> None:
    logp = torch.tensor([-1.0, -2.0])
    assert kappa_eff(logp, logp, torch.tensor([True, True]), torch.tensor([0, 1])) is None
    assert kappa_eff(logp, logp, torch.tensor([True, False]), torch.tensor([0, 1])) is None


def test_skewness_phi_nonnegative_exactly_on_the_paper_interval() -> None:
    assert skewness_phi(0.5) == 1.0
    # The lower root, by bisection, is 0.17604..., i.e. 0.176 to three decimals.
    lo, hi = 0.1, 0.3
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if skewness_phi(mid) < 0 else (lo, mid)
    assert round(lo, 3) == 0.176
    inside = torch.linspace(0.17605, 0.82395, 2001, dtype=torch.float64)
    assert (skewness_phi(inside) >= 0).all()
    # The interval ends are rounded: the true root 0.17604 lies just above 0.176.
    for b in (0.01, 0.1, 0.176, 0.824, 0.9, 0.99):
        assert skewness_phi(b) < 0, b
    assert skewness_phi(0.3) == pytest.approx(1 + 0.4 * math.log(0.3 / 0.7))
