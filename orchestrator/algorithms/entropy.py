"""Token entropy of a categorical policy from its logits (docs/algorithms.md#diagnostics)."""

from __future__ import annotations

import torch
from torch import Tensor

from orchestrator.algorithms.masking import masked_mean


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Shannon entropy of ``softmax(logits)`` over the last axis: ``(B, T, V)`` -> ``(B, T)``. Uses
    ``logsumexp(z) − Σ softmax(z)·z`` (verl's formula), which stays finite for large logits and is
    differentiable (the entropy-bonus loss backpropagates through it)."""
    # 16-bit logits are widened: the two terms nearly cancel for peaked distributions.
    wide = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    probs = torch.softmax(wide, dim=-1)
    # A -inf logit (a masked-out token) has probability 0 and adds 0 to the entropy; using
    # it as is would give 0 · (−inf) = NaN in the value and in the gradient.
    finite = torch.where(torch.isneginf(wide), torch.zeros_like(wide), wide)
    entropy = torch.logsumexp(wide, dim=-1) - (probs * finite).sum(dim=-1)
    return entropy.to(logits.dtype)


def token_entropy(logits: Tensor, mask: Tensor) -> Tensor:
    """Mean token entropy of the sampled responses over the valid tokens: the
    ``actor/entropy`` diagnostic (verl: masked mean over response tokens)."""
    return masked_mean(entropy_from_logits(logits), mask)


def sequence_entropy(logits: Tensor, mask: Tensor) -> Tensor:
    """Mean per-token entropy of each response ``(B,)``: the ``H(π_θ(o))`` of
    docs/algorithms.md#entropy-interventions."""
    return masked_mean(entropy_from_logits(logits), mask, dim=-1)
