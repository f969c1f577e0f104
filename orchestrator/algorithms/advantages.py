"""Group-relative advantage constructions (ALGORITHMS.md §1).

Every function takes outcome rewards shaped ``(groups, G)`` (one row per prompt, one
column per sampled response) and returns advantages of the same shape. The same advantage
is later put on every token of a response
(:func:`~orchestrator.algorithms.masking.broadcast_to_tokens`).

Conventions shared with verl's ``compute_grpo_outcome_advantage``: a group of a single
response has mean 0 and std 1 (so GRPO and DrGRPO pass its reward through unchanged), and
an all-equal group gets advantage 0.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor

from orchestrator.errors import Problem, UserInputError, unknown_name

AdvantageFn = Callable[..., Tensor]
StdKind = Literal["unbiased", "population"]
STD_KINDS: tuple[str, ...] = ("unbiased", "population")


def _as_groups(rewards: Tensor) -> Tensor:
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be shaped (groups, G); got {tuple(rewards.shape)}")
    return rewards if rewards.is_floating_point() else rewards.to(torch.get_default_dtype())


def _group_mean(rewards: Tensor) -> Tensor:
    if rewards.shape[1] == 1:
        return torch.zeros_like(rewards)
    return rewards.mean(dim=1, keepdim=True)


def grpo(rewards: Tensor, std: StdKind = "unbiased", eps: float = 1e-6) -> Tensor:
    """GRPO: ``(r_i − mean(r)) / (std(r) + eps)`` per group.

    ``std="unbiased"`` (N−1, verl's default) or ``"population"`` (N, the first paper's
    Table 1). Groups of one response use std 1, as verl does.
    """
    if std not in STD_KINDS:
        raise UserInputError(
            f"unknown std kind '{std}'",
            [Problem("advantage.std", "unknown std kind", found=repr(std),
                     allowed=", ".join(STD_KINDS))],
        )
    r = _as_groups(rewards)
    if r.shape[1] == 1:
        spread = torch.ones_like(r)
    else:
        spread = r.std(dim=1, keepdim=True, correction=1 if std == "unbiased" else 0)
    return (r - _group_mean(r)) / (spread + eps)


def drgrpo(rewards: Tensor) -> Tensor:
    """Dr.GRPO: ``r_i − mean(r)`` per group, no std normalisation."""
    r = _as_groups(rewards)
    return r - _group_mean(r)


def reward_budget_shares(rewards: Tensor) -> Tensor:
    """Reward budgeting's normalised rewards ``R_i = g_i / Σ_j g_j`` with ``g_i = r_i − min r``.

    Each non-skipped group's shares sum to 1; a group whose gaps sum to 0 (all rewards
    equal, or a single response) is skipped and gets all-zero shares.
    """
    r = _as_groups(rewards)
    gaps = r - r.min(dim=1, keepdim=True).values
    total = gaps.sum(dim=1, keepdim=True)
    skipped = total == 0
    # Divide by 1 where skipped so no 0/0 appears even transiently.
    return torch.where(skipped, torch.zeros_like(gaps), gaps / torch.where(skipped, 1.0, total))


def reward_budget(rewards: Tensor) -> Tensor:
    """Reward budgeting (RB): ``A_i = R_i − 1/G``; a skipped group contributes 0 everywhere.

    A unit budget per prompt is shared in proportion to the positive gaps above the
    group's minimum reward, so with ``k`` correct binary answers a correct one gets
    ``1/k − 1/G`` and a wrong one ``−1/G``.
    """
    r = _as_groups(rewards)
    shares = reward_budget_shares(r)
    skipped = (shares.sum(dim=1, keepdim=True) == 0).expand_as(shares)
    centred = shares - 1.0 / r.shape[1]
    return torch.where(skipped, torch.zeros_like(centred), centred)


ADVANTAGES: dict[str, AdvantageFn] = {
    "grpo": grpo,
    "drgrpo": drgrpo,
    "reward_budget": reward_budget,
}


def _check_options(kind: str, name: str, fn: Callable[..., object],
                   options: dict[str, object], skip: int) -> None:
    """Reject unknown keyword options with one Problem each, naming the allowed ones."""
    allowed = list(inspect.signature(fn).parameters)[skip:]
    bad = sorted(set(options) - set(allowed))
    if bad:
        raise UserInputError(
            f"unknown option(s) for {kind} '{name}': {', '.join(bad)}",
            [Problem(f"{kind}.{opt}", f"not an option of {kind} '{name}'", found=repr(opt),
                     allowed=", ".join(allowed) or "(none)") for opt in bad],
        )


def advantages(name: str, rewards: Tensor, **options: object) -> Tensor:
    """Advantages of ``rewards`` ``(groups, G)`` under the construction ``name``.

    Names are the keys of :data:`ADVANTAGES`: ``grpo`` (options ``std``, ``eps``),
    ``drgrpo`` and ``reward_budget``. The result has the shape of ``rewards``.
    Unknown names or options raise :class:`~orchestrator.errors.UserInputError`.
    """
    fn = ADVANTAGES.get(name)
    if fn is None:
        raise unknown_name("advantage", name, ADVANTAGES, "advantage")
    _check_options("advantage", name, fn, options, skip=1)
    return fn(rewards, **options)
