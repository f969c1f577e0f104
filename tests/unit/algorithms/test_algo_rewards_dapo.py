"""Reward transforms and DAPO helpers (docs/algorithms.md)."""

from __future__ import annotations

import pytest
import torch

from orchestrator.algorithms.rewards import (
    dynamic_sampling_keep,
    entropy_reward,
    overlong_penalty,
    random_rewards,
    scale_rewards,
)


def test_scale_rewards() -> None:
    out = scale_rewards(torch.tensor([True, False, True]), 5.0, 0.0)
    assert out.tolist() == [5.0, 0.0, 5.0]
    assert out.is_floating_point()


def test_random_rewards_are_a_function_of_seed_prompt_and_index() -> None:
    prompts = torch.arange(50).unsqueeze(1)
    index = torch.arange(8).unsqueeze(0)
    full = random_rewards(prompts, index, seed=7)
    assert full.shape == (50, 8)
    # Any sub-batch, in any order, gives the same coins as the full batch.
    order = torch.tensor([31, 4, 17, 4])
    again = random_rewards(order.unsqueeze(1), index, seed=7)
    assert torch.equal(again, full[order])
    single = random_rewards(torch.tensor(17), torch.tensor(5), seed=7)
    assert single.item() == full[17, 5].item()
    assert set(full.unique().tolist()) <= {0.0, 1.0}


def test_random_rewards_depend_on_the_seed_and_are_fair() -> None:
    prompts = torch.arange(1250).unsqueeze(1)
    index = torch.arange(8).unsqueeze(0)
    a = random_rewards(prompts, index, seed=0)
    b = random_rewards(prompts, index, seed=1)
    assert not torch.equal(a, b)
    # 10 000 coins: the mean is within 5 sigma (0.025) of 0.5 (deterministic given the seed).
    assert abs(a.mean().item() - 0.5) < 0.025
    assert abs(b.mean().item() - 0.5) < 0.025
    # Responses of one prompt are not all tied (which would give zero advantage).
    assert (a.amax(dim=1) != a.amin(dim=1)).float().mean().item() > 0.9


def test_random_rewards_need_integer_ids() -> None:
    with pytest.raises(ValueError):
        random_rewards(torch.tensor([1.0]), torch.tensor([0]), seed=0)


def test_entropy_reward_is_detached() -> None:
    ent = torch.tensor([0.5, 2.0], requires_grad=True)
    out = entropy_reward(torch.tensor([1.0, 0.0]), ent, coef=0.01)
    assert out.tolist() == pytest.approx([1.005, 0.02])
    assert not out.requires_grad


def test_dynamic_sampling_drops_all_equal_groups() -> None:
    rewards = torch.tensor([[1.0, 1, 1], [0, 0, 0], [0, 1, 0], [0.5, 0.5, 0.7]])
    assert dynamic_sampling_keep(rewards).tolist() == [False, False, True, True]
    assert dynamic_sampling_keep(torch.tensor([[1.0]])).tolist() == [False]


def test_overlong_penalty_matches_dapo() -> None:
    lengths = torch.tensor([0, 12, 16, 18, 20, 25])
    # max 20, cache 8: free up to 12 tokens, then -1/8 per token, -1 at the cap.
    out = overlong_penalty(lengths, max_length=20, cache_length=8, penalty_factor=1.0)
    assert out.tolist() == pytest.approx([0.0, 0.0, -0.5, -0.75, -1.0, -1.0])
    half = overlong_penalty(lengths, max_length=20, cache_length=8, penalty_factor=0.5)
    assert half.tolist() == pytest.approx([0.0, 0.0, -0.25, -0.375, -0.5, -0.5])
    with pytest.raises(ValueError):
        overlong_penalty(lengths, max_length=20, cache_length=0)
