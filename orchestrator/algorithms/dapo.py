"""DAPO's batch-level helpers: dynamic sampling and the soft over-long penalty (§2)."""

from __future__ import annotations

import torch
from torch import Tensor


def dynamic_sampling_keep(rewards: Tensor) -> Tensor:
    """Which groups to keep ``(groups,)`` from rewards ``(groups, G)``.

    A group whose rewards are all equal carries no learning signal and is dropped, as in
    verl's ``filter_groups`` (a group of one response counts as all equal). The caller
    keeps sampling until the batch is full.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be shaped (groups, G); got {tuple(rewards.shape)}")
    return rewards.amax(dim=1) != rewards.amin(dim=1)


def overlong_penalty(
    lengths: Tensor, max_length: int, cache_length: int, penalty_factor: float = 1.0
) -> Tensor:
    """DAPO's soft over-long punishment, added to the reward of each response.

    0 up to ``max_length − cache_length`` tokens, then falling linearly to
    ``−penalty_factor`` at ``max_length``, and ``−penalty_factor`` beyond it (verl's dapo
    reward manager never sees longer responses; clamping keeps the penalty bounded).
    """
    if not 0 < cache_length <= max_length:
        raise ValueError(
            f"need 0 < cache_length <= max_length; got cache_length={cache_length}, "
            f"max_length={max_length}"
        )
    excess = lengths.to(torch.get_default_dtype()) - (max_length - cache_length)
    penalty = -excess / cache_length * penalty_factor
    return penalty.clamp(min=-penalty_factor, max=0.0)
