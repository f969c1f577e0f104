"""Reward transforms applied before advantages (docs/algorithms.md#reward-variants):
verifier rewards scaled by a κ setting, spurious Bernoulli(0.5) rewards, the entropy
reward."""

from __future__ import annotations

import hashlib

import torch
from torch import Tensor


def scale_rewards(correct: Tensor, reward_correct: float, reward_incorrect: float) -> Tensor:
    """Verifier reward: ``reward_correct`` where ``correct`` else ``reward_incorrect``. With
    ``(r⁺, r⁻) = (5, 0)`` and β = 0.001 this is the κ = 5000 setting
    (docs/algorithms.md#kappa-settings)."""
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
    """Spurious rewards: Bernoulli(0.5), a pure function of ``(seed, prompt id, response index)``
    (not of the response text, the batching or the call order). ``prompt_ids`` and
    ``response_index`` are integer tensors that broadcast together (e.g. ``(groups, 1)`` and
    ``(1, G)``); the result has their broadcast shape, as floats 0/1."""
    if prompt_ids.is_floating_point() or response_index.is_floating_point():
        raise ValueError("random_rewards needs integer prompt_ids and response_index")
    ids, idx = torch.broadcast_tensors(prompt_ids, response_index)
    coins = [_coin(seed, int(p), int(i)) for p, i in zip(ids.reshape(-1).tolist(),
                                                         idx.reshape(-1).tolist(), strict=True)]
    return torch.tensor(coins, dtype=torch.get_default_dtype()).reshape(ids.shape)


def entropy_reward(rewards: Tensor, seq_entropy: Tensor, coef: float) -> Tensor:
    """``R(o) + coef · H(π_θ(o))``: ``seq_entropy`` is each response's mean token entropy under
    the rollout policy (:func:`~orchestrator.algorithms.entropy.sequence_entropy`), detached
    (kappa's choice, docs/algorithms.md#entropy-interventions): a reward, not a loss term."""
    if rewards.shape != seq_entropy.shape:
        raise ValueError(f"entropy_reward needs rewards and seq_entropy of one shape; got "
                         f"{tuple(rewards.shape)} and {tuple(seq_entropy.shape)}")
    # Integer/bool rewards (0/1 verifier flags) are promoted first: casting the entropy to
    # the rewards' dtype would truncate the bonus to an integer.
    dtype = rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()
    return rewards.to(dtype) + coef * seq_entropy.detach().to(dtype)
