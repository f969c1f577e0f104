"""Parity: kappa's advantage constructions equal verl 0.9.1's on identical tensors.

``reward_budget`` is called through verl's own dispatcher
(``verl.trainer.ppo.ray_trainer.compute_advantage``), i.e. exactly as the V1 trainer calls
it; GRPO and Dr.GRPO are compared with verl's ``compute_grpo_outcome_advantage``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("verl")
pytest.importorskip("kappa_verl")

from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
from verl.trainer.ppo.ray_trainer import compute_advantage

from orchestrator.algorithms.advantages import advantages


def _batch(groups: int, g: int, length: int, seed: int, binary: bool) -> tuple[
        torch.Tensor, torch.Tensor, np.ndarray, torch.Tensor]:
    """Token rewards on the last valid token, random lengths, shuffled uids."""
    gen = torch.Generator().manual_seed(seed)
    bs = groups * g
    lengths = torch.randint(1, length + 1, (bs,), generator=gen)
    mask = (torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)).float()
    if binary:
        scores = torch.randint(0, 2, (bs,), generator=gen).float() * 5.0
    else:
        scores = torch.randn(bs, generator=gen)
    token_rewards = torch.zeros(bs, length)
    token_rewards[torch.arange(bs), lengths - 1] = scores
    order = torch.randperm(bs, generator=gen)
    uids = np.array([f"p{i // g}" for i in range(bs)], dtype=object)[order.numpy()]
    group_rows = torch.stack([torch.nonzero(torch.from_numpy(uids == f"p{k}")).squeeze(-1)
                              for k in range(groups)])
    return token_rewards, mask, uids, group_rows


def _ours(name: str, token_rewards: torch.Tensor, mask: torch.Tensor, group_rows: torch.Tensor,
          **opts: object) -> torch.Tensor:
    scores = token_rewards.sum(-1)
    per_group = advantages(name, scores[group_rows], **opts)
    out = torch.zeros_like(scores)
    out[group_rows.reshape(-1)] = per_group.reshape(-1)
    return out.unsqueeze(-1) * mask


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("g", [2, 8])
def test_reward_budget_through_verl_dispatcher_equals_ours(binary: bool, g: int) -> None:
    token_rewards, mask, uids, group_rows = _batch(6, g, 7, seed=g, binary=binary)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": token_rewards, "response_mask": mask},
        non_tensors={"uid": uids},
    )
    algo = OmegaConf.create({"adv_estimator": "reward_budget", "gamma": 1.0, "lam": 1.0})
    out = compute_advantage(data, adv_estimator="reward_budget", config=algo)
    expected = _ours("reward_budget", token_rewards, mask, group_rows)
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=0, atol=1e-7)
    torch.testing.assert_close(out.batch["returns"], expected, rtol=0, atol=1e-7)


def test_reward_budget_binary_values_are_the_papers() -> None:
    """k of G correct: 1/k − 1/G and −1/G (guards against a vacuous parity)."""
    token_rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    mask = torch.ones(4, 2)
    data = DataProto.from_dict(tensors={"token_level_rewards": token_rewards,
                                        "response_mask": mask},
                               non_tensors={"uid": np.array(["a"] * 4, dtype=object)})
    out = compute_advantage(data, adv_estimator="reward_budget",
                            config=OmegaConf.create({"gamma": 1.0, "lam": 1.0}))
    per_response = out.batch["advantages"][:, 0]
    torch.testing.assert_close(per_response, torch.tensor([0.25, -0.25, 0.25, -0.25]))


@pytest.mark.parametrize("norm_by_std", [True, False])
@pytest.mark.parametrize("binary", [True, False])
def test_grpo_and_drgrpo_equal_verl(norm_by_std: bool, binary: bool) -> None:
    token_rewards, mask, uids, group_rows = _batch(5, 8, 6, seed=11, binary=binary)
    verl_adv, verl_ret = compute_grpo_outcome_advantage(
        token_level_rewards=token_rewards, response_mask=mask, index=uids,
        norm_adv_by_std_in_grpo=norm_by_std,
    )
    if norm_by_std:
        ours = _ours("grpo", token_rewards, mask, group_rows, std="unbiased")
    else:
        ours = _ours("drgrpo", token_rewards, mask, group_rows)
    torch.testing.assert_close(verl_adv, ours, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(verl_ret, ours, rtol=1e-6, atol=1e-6)


def test_single_response_groups_match_verl() -> None:
    token_rewards = torch.tensor([[0.0, 2.0], [3.0, 0.0]])
    mask = torch.ones(2, 2)
    uids = np.array(["a", "b"], dtype=object)
    verl_adv, _ = compute_grpo_outcome_advantage(token_rewards, mask, uids)
    ours = _ours("grpo", token_rewards, mask, torch.tensor([[0], [1]]))
    torch.testing.assert_close(verl_adv, ours)
