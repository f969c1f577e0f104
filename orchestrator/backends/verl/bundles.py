"""The six baseline bundles as verl runs them, and their resolution against a cell.

ALGORITHMS.md §2 names each bundle (:data:`~orchestrator.backends.rl_settings.BUNDLES`);
VERL_NOTES.md §1 gives verl's exact values, which win where they differ (ALGORITHMS.md
says so). :data:`VERL_CHANGES` lists those differences: GSPO and the DAPO family set the
dual-clip constant ``c = 10`` as verl's example scripts do, Clip-Cov uses the entropy
recipe's ``clip_ratio_low = clip_ratio_high = 1`` (the covariance mask does the clipping),
and Clip-Cov / KL-Cov carry the recipe's policy-loss parameters. The override rules are
the shared :func:`~orchestrator.backends.rl_settings.resolve_bundle`, so one spec means the
same thing on both backends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.backends.rl_settings import BundleChanges, bundles_with, resolve_bundle

if TYPE_CHECKING:
    from orchestrator.backends.verl.settings import VerlSettings

# verl has no "no clipping" switch: an infinite ratio is a huge finite one (VERL_NOTES §6).
UNCLIPPED = 1e9

_DUAL_CLIP = 10.0

# VERL_NOTES §1: where verl's recipes differ from ALGORITHMS.md §2.
VERL_CHANGES: dict[str, BundleChanges] = {
    "gspo": {"clip_ratio_c": _DUAL_CLIP},
    "dapo": {"clip_ratio_c": _DUAL_CLIP},
    "clip_cov": {"clip_ratio_c": _DUAL_CLIP, "clip_ratio_low": 1.0, "clip_ratio_high": 1.0,
                 "policy_loss_params": {"clip_cov_ratio": 0.0002, "clip_cov_lb": 1.0,
                                        "clip_cov_ub": 5.0}},
    "kl_cov": {"clip_ratio_c": _DUAL_CLIP,
               "policy_loss_params": {"kl_cov_ratio": 0.002, "ppo_kl_coef": 1.0}},
}

VERL_BUNDLES = bundles_with(VERL_CHANGES)


@dataclass(frozen=True)
class VerlAlgorithm:
    """Every algorithmic choice of a verl cell, bundle defaults filled in.

    Clip ratios are finite numbers verl accepts (``'inf'`` became :data:`UNCLIPPED`).
    """

    adv_estimator: str
    normalise_by_std: bool
    loss_mode: str
    loss_agg_mode: str
    clip_ratio_low: float
    clip_ratio_high: float
    clip_ratio_c: float
    use_kl_loss: bool
    kl_coef: float
    kl_loss_type: str
    dynamic_sampling: bool
    overlong_penalty: bool
    overlong_buffer: int
    policy_loss_params: dict[str, float]

    @property
    def unclipped(self) -> bool:
        """Whether the cell trains without importance-ratio clipping (ε = ∞)."""
        return self.clip_ratio_low >= UNCLIPPED and self.clip_ratio_high >= UNCLIPPED


def _finite(value: float) -> float:
    return UNCLIPPED if math.isinf(value) else value


def resolve_algorithm(s: VerlSettings) -> VerlAlgorithm:
    """The cell's verl bundle with its explicit settings applied (see the module docstring)."""
    bundle = VERL_BUNDLES[s.baseline]
    a = resolve_bundle(s, bundle, kl_loss_type=s.kl_loss_type,
                       overlong_penalty=s.overlong_penalty)
    return VerlAlgorithm(
        # verl has no drgrpo estimator: Dr.GRPO is grpo without std normalisation.
        adv_estimator="reward_budget" if s.reward_budget else "grpo",
        normalise_by_std=bundle.advantage != "drgrpo",
        loss_mode=a.loss,
        loss_agg_mode=a.loss_agg_mode,
        clip_ratio_low=_finite(a.clip_ratio_low),
        clip_ratio_high=_finite(a.clip_ratio_high),
        clip_ratio_c=_finite(a.clip_ratio_c),
        use_kl_loss=a.use_kl_loss,
        kl_coef=a.kl_coef,
        kl_loss_type=a.kl_loss_type,
        dynamic_sampling=a.dynamic_sampling,
        overlong_penalty=a.overlong_penalty,
        overlong_buffer=s.overlong_buffer,
        policy_loss_params=dict(bundle.policy_loss_params),
    )
