"""Group-relative advantages (docs/algorithms.md#advantages): rewards ``(groups, G)`` in, one
advantage per response out. Edge cases follow verl's ``compute_grpo_outcome_advantage``; group
statistics are computed in float64 (16-bit floats, and float32 at large G, lose digits) and rounded
once, back to the rewards' floating dtype."""

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
    """GRPO: ``(r_i − mean(r)) / (std(r) + eps)`` per group, ``std`` unbiased (verl's default) or
    population (the first paper's Table 1). A group of one response uses std 1; equal rewards give
    exactly 0 (float rounding of the mean must not make ``±tiny / eps``). Non-finite rewards raise
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
    """Reward budgeting's shares ``R_i = g_i / Σ_j g_j``, ``g_i = r_i − min r``: each group's sum to
    1, but a group whose gaps sum to 0 (all equal, or one response) is skipped: all zeros."""
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
    """Reward budgeting (RB): ``A_i = R_i − 1/G``, 0 for a skipped group; with ``k`` correct binary
    answers a correct one gets ``1/k − 1/G``, a wrong one ``−1/G``."""
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
    """Advantages of ``rewards`` ``(groups, G)`` by construction ``name`` (a key of
    :data:`ADVANTAGES`; ``grpo`` takes ``std`` and ``eps``); unknown names or options raise
    ``AlgorithmError``."""
    if (fn := ADVANTAGES.get(name)) is None:
        raise unknown_name("advantage", name, ADVANTAGES, "advantage")
    allowed = list(inspect.signature(fn).parameters)[1:]
    if issues := unknown_options("advantage", f"advantage '{name}'", options, allowed):
        bad = ", ".join(sorted(set(options) - set(allowed)))
        raise AlgorithmError(f"unknown option(s) for advantage '{name}': {bad}", issues)
    return fn(rewards, **options)
