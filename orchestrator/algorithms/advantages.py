"""Group-relative advantage constructions (docs/algorithms.md#advantages): outcome rewards
``(groups, G)`` in, advantages of the same shape out (one per response, later put on
each of its tokens). Edge cases follow verl's ``compute_grpo_outcome_advantage``: a
group of one response has mean 0 and std 1, an all-equal group gets advantage 0. Group
statistics are computed in float64 (float16/bfloat16, and float32 with large G, lose digits
in mean and std); the result is rounded once, back to the rewards' floating dtype."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor

from orchestrator.algorithms.errors import AlgorithmError, Issue, unknown_name, unknown_options

AdvantageFn = Callable[..., Tensor]
StdKind = Literal["unbiased", "population"]
STD_KINDS: tuple[str, ...] = ("unbiased", "population")


def _as_groups(rewards: Tensor) -> Tensor:
    """Check ``rewards`` ``(groups, G)`` and return it as floats (integers/bools converted)."""
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be shaped (groups, G); got {tuple(rewards.shape)}")
    if rewards.shape[1] == 0:
        raise ValueError("rewards must hold at least one response per group; got G = 0")
    r = rewards if rewards.is_floating_point() else rewards.to(torch.get_default_dtype())
    bad = ~torch.isfinite(r)
    if bool(bad.any()):
        # A NaN/inf reward would silently turn its whole group's advantages into NaN.
        where = [tuple(pos) for pos in torch.nonzero(bad)[:5].tolist()]
        values = [r[g, i].item() for g, i in where]
        raise ValueError(f"rewards must be finite: {int(bad.sum())} non-finite value(s), first "
                         f"at (group, response) {where} = {values}; check the reward function")
    return r


def _group_mean(rewards: Tensor) -> Tensor:
    return torch.zeros_like(rewards) if rewards.shape[1] == 1 else rewards.mean(dim=1, keepdim=True)


def _all_equal(rewards: Tensor) -> Tensor:
    """``(groups, 1)``: groups of two or more responses whose rewards are all equal."""
    equal = rewards.amax(dim=1, keepdim=True) == rewards.amin(dim=1, keepdim=True)
    return equal & (rewards.shape[1] > 1)


def grpo(rewards: Tensor, std: StdKind = "unbiased", eps: float = 1e-6) -> Tensor:
    """GRPO: ``(r_i − mean(r)) / (std(r) + eps)`` per group. ``std="unbiased"`` (N−1, verl's
    default) or ``"population"`` (N, the first paper's Table 1). Groups of one response use std 1,
    as verl does. A group of equal rewards gets exactly 0 (its deviations are 0 by definition; float
    rounding of the mean must not turn them into ``±tiny / eps``). Non-finite rewards raise
    ``ValueError``."""
    if std not in STD_KINDS:
        raise AlgorithmError(f"unknown std kind '{std}'", [Issue(
            "advantage.std", "unknown std kind", found=repr(std), allowed=", ".join(STD_KINDS))])
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0; got {eps}")
    r = _as_groups(rewards)
    if r.numel() == 0:
        return r.clone()
    wide = r.to(torch.float64)
    if wide.shape[1] == 1:
        spread = torch.ones_like(wide)
    else:
        spread = wide.std(dim=1, keepdim=True, correction=1 if std == "unbiased" else 0)
    adv = (wide - _group_mean(wide)) / (spread + eps)
    adv = torch.where(_all_equal(wide), torch.zeros_like(adv), adv)
    return adv.to(r.dtype)


def drgrpo(rewards: Tensor) -> Tensor:
    """Dr.GRPO: ``r_i − mean(r)`` per group, no std normalisation (0 for equal rewards)."""
    r = _as_groups(rewards)
    wide = r.to(torch.float64)
    adv = wide - _group_mean(wide)
    adv = torch.where(_all_equal(wide), torch.zeros_like(adv), adv)
    return adv.to(r.dtype)


def reward_budget_shares(rewards: Tensor) -> Tensor:
    """Reward budgeting's normalised rewards ``R_i = g_i / Σ_j g_j`` with ``g_i = r_i − min r``.
    Each non-skipped group's shares sum to 1; a group whose gaps sum to 0 (all rewards equal, or a
    single response) is skipped and gets all-zero shares."""
    r = _as_groups(rewards)
    wide = r.to(torch.float64)
    gaps = wide - wide.min(dim=1, keepdim=True).values
    total = gaps.sum(dim=1, keepdim=True)
    skipped = total == 0
    # Divide by 1 where skipped so no 0/0 appears even transiently.
    shares = torch.where(skipped, torch.zeros_like(gaps),
                         gaps / torch.where(skipped, 1.0, total))
    return shares.to(r.dtype)


def reward_budget(rewards: Tensor) -> Tensor:
    """Reward budgeting (RB): ``A_i = R_i − 1/G``; a skipped group contributes 0 everywhere. A unit
    budget per prompt is shared in proportion to the positive gaps above the group's minimum reward,
    so with ``k`` correct binary answers a correct one gets ``1/k − 1/G`` and a wrong one ``−1/G``.
    """
    r = _as_groups(rewards)
    wide = r.to(torch.float64)
    shares = reward_budget_shares(wide)
    # Skipped exactly when every gap is 0, i.e. all rewards equal (or G = 1).
    skipped = (wide.amax(dim=1, keepdim=True) == wide.amin(dim=1, keepdim=True))
    centred = shares - 1.0 / wide.shape[1]
    return torch.where(skipped, torch.zeros_like(centred), centred).to(r.dtype)


ADVANTAGES: dict[str, AdvantageFn] = {
    "grpo": grpo, "drgrpo": drgrpo, "reward_budget": reward_budget}


def advantages(name: str, rewards: Tensor, **options: object) -> Tensor:
    """Advantages of ``rewards`` ``(groups, G)`` under the construction ``name`` (a key of
    :data:`ADVANTAGES`: ``grpo`` with options ``std`` and ``eps``, ``drgrpo``,
    ``reward_budget``). Unknown names or options raise ``AlgorithmError``."""
    if (fn := ADVANTAGES.get(name)) is None:
        raise unknown_name("advantage", name, ADVANTAGES, "advantage")
    allowed = list(inspect.signature(fn).parameters)[1:]
    if issues := unknown_options("advantage", f"advantage '{name}'", options, allowed):
        bad = ", ".join(sorted(set(options) - set(allowed)))
        raise AlgorithmError(f"unknown option(s) for advantage '{name}': {bad}", issues)
    return fn(rewards, **options)
