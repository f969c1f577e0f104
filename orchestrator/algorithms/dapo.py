"""DAPO's batch-level helpers: dynamic sampling and the soft over-long penalty
(docs/algorithms.md#baseline-bundles)."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def dynamic_sampling_keep(rewards: Tensor) -> Tensor:
    """Which groups to keep ``(groups,)`` from rewards ``(groups, G)``: a group whose rewards are
    all equal (exactly, so ``[0.1, 0.1, 0.1]`` too) carries no learning signal and is dropped
    (DAPO's ``0 < #correct < G``), as is a group of one response (verl 0.9.1's ``filter_groups``
    keeps it). All dropped is all False, never an error: the caller decides how often to
    resample. Non-finite rewards raise ``ValueError`` (NaN would keep a broken group)."""
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be shaped (groups, G); got {tuple(rewards.shape)}")
    if rewards.is_floating_point() and not bool(torch.isfinite(rewards).all()):
        raise ValueError("dynamic_sampling_keep: rewards must be finite (found NaN or inf)")
    if rewards.shape[1] == 0:
        return torch.zeros(rewards.shape[0], dtype=torch.bool, device=rewards.device)
    return rewards.amax(dim=1) != rewards.amin(dim=1)


def overlong_penalty(lengths: Tensor, max_length: int, cache_length: int,
                     penalty_factor: float = 1.0) -> Tensor:
    """DAPO's soft over-long punishment, added to the reward of each response. 0 up to
    ``max_length − cache_length`` tokens, then falling linearly to ``−penalty_factor`` at exactly
    ``max_length``, and ``−penalty_factor`` beyond it (DAPO's ``R_length``; verl's dapo reward
    manager never sees longer responses, and clamping keeps the penalty bounded)."""
    if not 0 < cache_length <= max_length:
        raise ValueError(f"need 0 < cache_length <= max_length; got cache_length={cache_length}, "
                         f"max_length={max_length}")
    if not (math.isfinite(penalty_factor) and penalty_factor >= 0):
        raise ValueError(f"penalty_factor must be a finite number >= 0; got {penalty_factor}")
    dtype = lengths.dtype if lengths.is_floating_point() else torch.get_default_dtype()
    excess = lengths.to(dtype) - (max_length - cache_length)
    penalty = (-excess / cache_length * penalty_factor).clamp(min=-penalty_factor, max=0.0)
    # + 0.0 turns the −0.0 of responses within the budget into a plain 0.
    return penalty + 0.0
