"""Reward transforms applied before advantages (docs/algorithms.md#reward-variants):
verifier rewards scaled by a κ setting, spurious Bernoulli(0.5) rewards, the entropy reward,
DAPO's soft over-long penalty; and DAPO's dynamic sampling, which keeps the groups whose
rewards differ (docs/algorithms.md#baseline-bundles)."""

from __future__ import annotations

import hashlib
import math

import torch
from torch import Tensor


def scale_rewards(correct: Tensor, reward_correct: float, reward_incorrect: float) -> Tensor:
    """Verifier reward: ``reward_correct`` where ``correct``, else ``reward_incorrect`` (a κ
    setting, docs/algorithms.md#kappa-settings)."""
    high = torch.full(correct.shape, float(reward_correct), dtype=torch.get_default_dtype())
    low = torch.full(correct.shape, float(reward_incorrect), dtype=torch.get_default_dtype())
    return torch.where(correct.bool(), high, low)


def _coin(seed: int, prompt_id: int, response_index: int) -> float:
    # A keyed hash of the triple, not a stateful RNG: the same triple always gives the same
    # coin, whatever the batch composition, call order, process or platform.
    digest = hashlib.blake2b(f"{prompt_id}:{response_index}".encode(), digest_size=8,
                             key=str(seed).encode()).digest()
    return float(digest[0] & 1)


def random_rewards(prompt_ids: Tensor, response_index: Tensor, seed: int) -> Tensor:
    """Spurious Bernoulli(0.5) rewards, a pure function of ``(seed, prompt id, response index)``;
    the integer ``prompt_ids`` and ``response_index`` broadcast together (``(groups, 1)`` and ``(1,
    G)``) into the result's shape, floats 0/1."""
    if prompt_ids.is_floating_point() or response_index.is_floating_point():
        raise ValueError("random_rewards needs integer prompt_ids and response_index")
    ids, idx = torch.broadcast_tensors(prompt_ids, response_index)
    coins = [_coin(seed, int(p), int(i)) for p, i in zip(ids.reshape(-1).tolist(),
                                                         idx.reshape(-1).tolist(), strict=True)]
    return torch.tensor(coins, dtype=torch.get_default_dtype()).reshape(ids.shape)


def entropy_reward(rewards: Tensor, seq_entropy: Tensor, coef: float) -> Tensor:
    """``R(o) + coef · H(π_θ(o))``, ``seq_entropy`` each response's mean token entropy under the
    rollout policy, detached: a reward, not a loss term."""
    if rewards.shape != seq_entropy.shape:
        raise ValueError(f"entropy_reward needs rewards and seq_entropy of one shape; got "
                         f"{tuple(rewards.shape)} and {tuple(seq_entropy.shape)}")
    # Integer/bool rewards (0/1 verifier flags) are promoted first: casting the entropy to
    # the rewards' dtype would truncate the bonus to an integer.
    dtype = rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()
    return rewards.to(dtype) + coef * seq_entropy.detach().to(dtype)


def dynamic_sampling_keep(rewards: Tensor) -> Tensor:
    """Which groups ``(groups,)`` of rewards ``(groups, G)`` to keep: not those whose rewards are
    all exactly equal, nor one of a single response (verl 0.9.1 keeps it). All dropped is all False:
    the caller resamples. Non-finite rewards raise ``ValueError``."""
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be shaped (groups, G); got {tuple(rewards.shape)}")
    if rewards.is_floating_point() and not bool(torch.isfinite(rewards).all()):
        raise ValueError("dynamic_sampling_keep: rewards must be finite (found NaN or inf)")
    if rewards.shape[1] == 0:
        return torch.zeros(rewards.shape[0], dtype=torch.bool, device=rewards.device)
    return rewards.amax(dim=1) != rewards.amin(dim=1)


def overlong_penalty(lengths: Tensor, max_length: int, cache_length: int,
                     penalty_factor: float = 1.0) -> Tensor:
    """DAPO's soft over-long penalty, added to each response's reward: 0 up to ``max_length −
    cache_length`` tokens, falling linearly to ``−penalty_factor`` at ``max_length`` and staying
    there beyond (verl never sees longer; the clamp bounds it)."""
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
