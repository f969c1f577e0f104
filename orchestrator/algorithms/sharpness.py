"""The sharpness factor κ and the first paper's advantage table
(docs/algorithms.md#sharpness-kappa-and-the-advantage-table): per ``k`` correct binary
answers of ``G``, the ``A⁺``, ``A⁻`` and κ of reward budgeting, DrGRPO and GRPO."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import overload

import torch
from torch import Tensor

from orchestrator.algorithms.advantages import STD_KINDS, StdKind, advantages
from orchestrator.algorithms.errors import AlgorithmError, Issue

# Rewards built per chunk of rows in advantage_table (bounded memory for any G).
_CHUNK_ELEMENTS = 1 << 20


@overload
def sharpness_kappa(adv_pos: float, adv_neg: float, beta: float) -> float: ...
@overload
def sharpness_kappa(adv_pos: Tensor, adv_neg: Tensor | float, beta: float) -> Tensor: ...
def sharpness_kappa(
    adv_pos: float | Tensor, adv_neg: float | Tensor, beta: float
) -> float | Tensor:
    """``κ = (A⁺ − A⁻) / β`` of a correct/incorrect pair; on raw rewards, the κ of a reward setting
    (docs/algorithms.md#kappa-settings)."""
    if not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a finite number > 0; got {beta}")
    return (adv_pos - adv_neg) / beta


@dataclass(frozen=True)
class PairAdvantages:
    """Advantages of a correct (``pos``) and an incorrect (``neg``) answer, and their κ."""

    pos: float
    neg: float
    kappa: float


@dataclass(frozen=True)
class AdvantageRow:
    """One row of the advantage table: ``k`` correct answers out of ``group_size``."""

    k: int
    group_size: int
    reward_budget: PairAdvantages
    drgrpo: PairAdvantages
    grpo: PairAdvantages

    def by_construction(self, name: str) -> PairAdvantages:
        """The cell of advantage construction ``name`` (reward_budget, drgrpo or grpo)."""
        cells = {"reward_budget": self.reward_budget, "drgrpo": self.drgrpo, "grpo": self.grpo}
        return cells[name]


def _validate(group_size: int, beta: float, std: str) -> None:
    problems = []
    if group_size < 2:
        problems.append(Issue("group_size", "needs at least 2 responses per group",
                              found=str(group_size), allowed="integers >= 2"))
    if not (math.isfinite(beta) and beta > 0):
        # β = 0 (no KL) makes κ infinite: the table of κ values is undefined.
        problems.append(Issue("beta", "KL strength must be a positive finite number",
                              found=repr(beta), fix="e.g. 0.001"))
    if std not in STD_KINDS:
        problems.append(Issue("std", "unknown std kind", found=repr(std),
                              allowed=", ".join(STD_KINDS)))
    if problems:
        raise AlgorithmError("cannot build the advantage table", problems)


def advantage_table(
    group_size: int, beta: float, std: StdKind = "population"
) -> list[AdvantageRow]:
    """Rows ``k = 1 .. G−1`` of binary-reward advantages and κ for RB, DrGRPO and GRPO, computed by
    :func:`~orchestrator.algorithms.advantages.advantages` itself (GRPO with ``eps = 0``: the
    analytic values). ``G = 8, β = 0.001`` with the population std is the first paper's Table 1."""
    _validate(group_size, beta, std)
    rows = []
    # One group per k: the first k responses correct (reward 1), the rest 0. Built in
    # chunks of rows: the full (G−1) × G matrix would need G² floats (20 GB at G = 50 000).
    chunk = max(1, _CHUNK_ELEMENTS // group_size)
    for start in range(1, group_size, chunk):
        ks = torch.arange(start, min(start + chunk, group_size), dtype=torch.int64)
        rewards = (torch.arange(group_size).unsqueeze(0) < ks.unsqueeze(1)).to(torch.float64)
        per_name = {
            "reward_budget": advantages("reward_budget", rewards),
            "drgrpo": advantages("drgrpo", rewards),
            "grpo": advantages("grpo", rewards, std=std, eps=0.0),
        }
        for row, k in enumerate(ks.tolist()):
            cells = {}
            for name, adv in per_name.items():
                pos, neg = adv[row, 0].item(), adv[row, -1].item()
                cells[name] = PairAdvantages(pos=pos, neg=neg,
                                             kappa=sharpness_kappa(pos, neg, beta))
            rows.append(AdvantageRow(k=k, group_size=group_size, **cells))
    return rows
