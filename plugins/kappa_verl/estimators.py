"""The ``reward_budget`` advantage estimator, in verl's calling convention.

verl's dispatcher (``verl.trainer.ppo.ray_trainer.compute_advantage``) calls any
non-built-in estimator as ``fn(token_level_rewards=, response_mask=, config=, index=,
[reward_baselines=])``. This adapter turns that into kappa's group-shaped call
``orchestrator.algorithms.advantages.advantages("reward_budget", rewards (groups, G))`` so both
backends use one implementation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from kappa_verl import ESTIMATOR_NAME
from orchestrator.algorithms.advantages import advantages


def outcome_advantages(name: str, scores: Tensor, index: np.ndarray | None) -> Tensor:
    """Per-response advantages ``(bs,)`` of outcome ``scores`` grouped by ``index`` (uid).

    Groups need not be contiguous nor of equal size (verl may reorder or pad a batch);
    each group is passed to :func:`orchestrator.algorithms.advantages.advantages` as one row.
    Without an index the whole batch is one group.
    """
    if index is None:
        return advantages(name, scores.unsqueeze(0)).squeeze(0)
    out = torch.zeros_like(scores)
    members: dict[Any, list[int]] = {}
    for position, uid in enumerate(index.tolist()):
        members.setdefault(uid, []).append(position)
    for positions in members.values():
        rows = torch.tensor(positions, dtype=torch.long, device=scores.device)
        out[rows] = advantages(name, scores[rows].unsqueeze(0)).squeeze(0)
    return out


def reward_budget_estimator(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    config: Any = None,
    index: np.ndarray | None = None,
    **kwargs: Any,
) -> tuple[Tensor, Tensor]:
    """Reward budgeting (docs/algorithms.md#advantages) as a verl advantage estimator.

    The outcome reward of a response is the sum of its token rewards (as in verl's GRPO);
    responses are grouped by ``index`` (verl's ``uid``). Returns ``(advantages, returns)``,
    both ``(bs, response_len)``: the response's advantage on every valid token, 0 on
    padding. ``config`` and extra keyword arguments (``reward_baselines``) are unused: RB
    has no parameters.
    """
    del config, kwargs
    scores = token_level_rewards.sum(dim=-1)
    with torch.no_grad():
        per_response = outcome_advantages(ESTIMATOR_NAME, scores, index)
        token_adv = per_response.unsqueeze(-1) * response_mask.to(per_response.dtype)
    return token_adv, token_adv


def register() -> None:
    """Put ``reward_budget`` into verl's ``ADV_ESTIMATOR_REGISTRY`` (idempotent)."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    if ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR_NAME) is not reward_budget_estimator:
        register_adv_est(ESTIMATOR_NAME)(reward_budget_estimator)
