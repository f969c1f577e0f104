"""Masked reductions and the loss-aggregation modes (docs/algorithms.md#aggregation-modes), as verl
0.9.1's ``masked_mean`` and ``agg_loss`` (one data-parallel rank) compute them, so losses and
metrics agree with verl to floating-point precision."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from orchestrator.algorithms.errors import unknown_name

AggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
AGG_MODES: tuple[str, ...] = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")

# verl adds this to every masked-mean denominator; keeping it makes metrics bit-comparable.
MASKED_MEAN_EPS = 1e-8


def masked_sum(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum of ``values`` where ``mask`` is non-zero; NaNs outside the mask are ignored."""
    # torch.where first so a NaN in a padded position cannot leak through 0 * NaN.
    valid = torch.where(mask.bool(), values, torch.zeros_like(values))
    weighted = valid * mask
    return weighted.sum() if dim is None else weighted.sum(dim=dim)


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``values`` where ``mask`` is non-zero, verl's way: the count summed in the mask's
    dtype plus ``1e-8`` (bit-for-bit; an all-zero mask yields 0)."""
    count = mask.sum() if dim is None else mask.sum(dim=dim)
    return masked_sum(values, mask, dim) / (count + MASKED_MEAN_EPS)


def broadcast_to_tokens(adv: Tensor, mask: Tensor) -> Tensor:
    """One value per response onto each of its tokens: ``(B,)`` -> ``(B, T)``, 0 on padding (verl's
    ``scores.unsqueeze(-1) * response_mask``)."""
    if adv.dim() != 1 or mask.dim() != 2 or adv.shape[0] != mask.shape[0]:
        raise ValueError(f"broadcast_to_tokens needs adv (B,) and mask (B, T); got "
                         f"{tuple(adv.shape)} and {tuple(mask.shape)}")
    return adv.unsqueeze(-1) * mask.to(adv.dtype)


def aggregate(loss_mat: Tensor, mask: Tensor, mode: str,
              loss_scale_factor: float | None = None) -> Tensor:
    """Reduce a per-token loss ``(B, T)`` to a scalar by ``mode`` (``token-mean``,
    ``seq-mean-token-mean``: responses without a valid token left out, or
    ``seq-mean-token-sum-norm``: divided by ``loss_scale_factor``, default the padded length ``T``
    as in verl). A batch without a valid token gives 0 (verl: NaN)."""
    if mode not in AGG_MODES:
        raise unknown_name("loss aggregation mode", mode, AGG_MODES, "loss_agg_mode")
    if loss_mat.shape != mask.shape or loss_mat.dim() != 2:
        raise ValueError(f"aggregate needs loss_mat and mask of one shape (B, T); got "
                         f"{tuple(loss_mat.shape)} and {tuple(mask.shape)}")
    # Counts stay in the mask's dtype (as in verl) so the 1e-8 below rounds the same way.
    # A denominator of 0 (no valid token / no non-empty response in the whole batch) is
    # replaced by 1: the numerator is then 0 too, so the loss is 0 with a zero gradient
    # instead of verl's 0/0 = NaN, which would poison every weight on backward.
    if mode == "token-mean":
        return masked_sum(loss_mat, mask) / _nonzero(mask.sum())
    tokens_per_seq = mask.sum(dim=-1)
    # float32 like verl's ``.float()``, so bf16/fp16 losses are averaged as verl does.
    seq_present = (tokens_per_seq > 0).float()
    seq_sums = masked_sum(loss_mat, mask, dim=-1)
    if mode == "seq-mean-token-mean":
        # verl's + 1e-8 on every count (bit-for-bit parity); an empty response divides by 1
        # instead, since in float16 1e-8 rounds away and 0/0 would put NaN in the gradient.
        seq_means = seq_sums / torch.where(tokens_per_seq > 0, tokens_per_seq + MASKED_MEAN_EPS,
                                           torch.ones_like(tokens_per_seq))
        return masked_sum(seq_means, seq_present) / _nonzero(seq_present.sum())
    loss = masked_sum(seq_sums, seq_present) / _nonzero(seq_present.sum())
    if loss_scale_factor is None:
        # max(T, 1): a (B, 0) batch has a 0 loss, not 0/0.
        return loss / float(max(mask.shape[-1], 1))
    if not (math.isfinite(loss_scale_factor) and loss_scale_factor > 0):
        raise ValueError(f"loss_scale_factor must be a finite number > 0; got {loss_scale_factor}")
    return loss / float(loss_scale_factor)


def _nonzero(count: Tensor) -> Tensor:
    return torch.where(count == 0, torch.ones_like(count), count)
