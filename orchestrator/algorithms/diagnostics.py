"""Per-step diagnostics every backend reports (docs/algorithms.md#diagnostics): token
entropy, clip activation, κ_eff and the two-armed skewness Φ."""

from __future__ import annotations

import math
from typing import NamedTuple, overload

import torch
from torch import Tensor

from orchestrator.algorithms.masking import masked_mean


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Shannon entropy of ``softmax(logits)`` over the last axis, ``(B, T, V)`` -> ``(B, T)``, as
    verl computes it (``logsumexp(z) − Σ softmax(z)·z``): finite for large logits, and
    differentiable (the entropy bonus backpropagates)."""
    # 16-bit logits are widened: the two terms nearly cancel for peaked distributions.
    wide = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    probs = torch.softmax(wide, dim=-1)
    # A -inf logit (a masked-out token) has probability 0 and adds 0 to the entropy; using
    # it as is would give 0 · (−inf) = NaN in the value and in the gradient.
    finite = torch.where(torch.isneginf(wide), torch.zeros_like(wide), wide)
    entropy = torch.logsumexp(wide, dim=-1) - (probs * finite).sum(dim=-1)
    return entropy.to(logits.dtype)


class ClipFractions(NamedTuple):
    """Shares of valid tokens where the PPO ratio clip binds, per side."""

    upper: float  # A > 0 and ρ > 1 + ε_high
    lower: float  # A < 0 and ρ < 1 − ε_low


def clip_fractions(old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, mask: Tensor,
                   clip_ratio_low: float, clip_ratio_high: float) -> ClipFractions:
    """Clip activation, upper and lower apart (the second paper's); ``upper + lower`` is verl's
    ``actor/pg_clipfrac`` for the vanilla loss (verl's ``actor/pg_clipfrac_lower`` is the dual
    clip's)."""
    ratio = torch.exp(log_prob - old_log_prob)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1).expand_as(ratio)
    upper = (advantages > 0) & (ratio > 1 + clip_ratio_high)
    lower = (advantages < 0) & (ratio < 1 - clip_ratio_low)
    return ClipFractions(upper=masked_mean(upper.to(ratio.dtype), mask).item(),
                         lower=masked_mean(lower.to(ratio.dtype), mask).item())


def kappa_eff(seq_logp_new: Tensor, seq_logp_old: Tensor, correct: Tensor,
              group_index: Tensor) -> float | None:
    """Effective sharpening (docs/algorithms.md#diagnostics) from four ``(N,)`` tensors: summed
    sequence log-probs after and before the update, a 0/1 correct flag and the prompt (group) id of
    each response; every pair weighs the same. ``None`` without a pair."""
    shapes = [tuple(t.shape) for t in (seq_logp_new, seq_logp_old, correct, group_index)]
    if len(shapes[0]) != 1 or len(set(shapes)) != 1:
        raise ValueError(f"kappa_eff needs four (N,) tensors; got {shapes}")
    if correct.dtype != torch.bool and not bool(((correct == 0) | (correct == 1)).all()):
        # Passing rewards (e.g. r⁻ = −1) here would silently count every response as correct.
        raise ValueError("kappa_eff: `correct` must be 0/1 or bool flags, not rewards")
    delta = (seq_logp_new - seq_logp_old).detach().to(torch.float64)
    good = correct.bool()
    groups, inverse = torch.unique(group_index, return_inverse=True)
    n = len(groups)
    ones = torch.ones_like(delta)
    n_good = torch.zeros(n, dtype=torch.float64).index_add_(0, inverse[good], ones[good])
    n_bad = torch.zeros(n, dtype=torch.float64).index_add_(0, inverse[~good], ones[~good])
    sum_good = torch.zeros(n, dtype=torch.float64).index_add_(0, inverse[good], delta[good])
    sum_bad = torch.zeros(n, dtype=torch.float64).index_add_(0, inverse[~good], delta[~good])
    pairs = n_good * n_bad
    total_pairs = pairs.sum().item()
    if total_pairs == 0:
        return None
    # Σ_pairs (δ⁺ − δ⁻) = n⁻·Σδ⁺ − n⁺·Σδ⁻ per group, so no pair list is built.
    return ((n_bad * sum_good - n_good * sum_bad).sum() / total_pairs).item()


@overload
def skewness_phi(b: float) -> float: ...
@overload
def skewness_phi(b: Tensor) -> Tensor: ...
def skewness_phi(b: float | Tensor) -> float | Tensor:
    """Two-armed skewness (second paper, Remark 4.2) of ``π = (b, 1 − b)``: ``Φ = 1 + (1 − 2b)·log(b
    / (1 − b))``, ``−inf`` at ``b = 0`` or ``1``; ``b`` outside ``[0, 1]`` or NaN raises
    ``ValueError``."""
    if isinstance(b, Tensor):
        if not bool(((b >= 0) & (b <= 1)).all()):
            raise ValueError("skewness_phi: every b must lie in [0, 1]")
        # log(b) − log1p(−b) is log(b/(1−b)) without the 1/0 at b = 1.
        return 1 + (1 - 2 * b) * (torch.log(b) - torch.log1p(-b))
    if not 0 <= b <= 1:
        raise ValueError(f"skewness_phi: b must lie in [0, 1]; got {b}")
    if b in (0, 1):
        return -math.inf
    return 1 + (1 - 2 * b) * math.log(b / (1 - b))
