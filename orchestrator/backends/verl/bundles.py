"""The six baseline bundles as verl runs them, and their resolution against a cell.

ALGORITHMS.md §2 names each bundle; VERL_NOTES.md §1 gives verl's exact values, which win
where they differ (ALGORITHMS.md says so): GSPO and the DAPO family set the dual-clip
constant ``c = 10`` as verl's example scripts do, and Clip-Cov uses the entropy recipe's
``clip_ratio_low = clip_ratio_high = 1`` (the covariance mask does the clipping).
The override rules (``clip_ratio`` shorthand, ``kl_coef`` implying the KL loss) are the
embedded backend's, so one spec means the same thing on both backends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.backends.verl.settings import VerlSettings

# verl has no "no clipping" switch: an infinite ratio is a huge finite one (VERL_NOTES §6).
UNCLIPPED = 1e9


@dataclass(frozen=True)
class VerlBundle:
    """One baseline's verl settings before the cell's overrides."""

    normalise_by_std: bool
    loss_mode: str
    loss_agg_mode: str
    clip_ratio_low: float
    clip_ratio_high: float
    clip_ratio_c: float
    use_kl_loss: bool
    dynamic_sampling: bool
    overlong_penalty: bool
    policy_loss_params: dict[str, float] = field(default_factory=dict)


VERL_BUNDLES: dict[str, VerlBundle] = {
    "grpo": VerlBundle(True, "vanilla", "token-mean", 0.2, 0.2, 3.0, True, False, False),
    "drgrpo": VerlBundle(False, "vanilla", "seq-mean-token-sum-norm", 0.2, 0.2, 3.0,
                         False, False, False),
    "gspo": VerlBundle(True, "gspo", "seq-mean-token-mean", 3e-4, 4e-4, 10.0,
                       False, False, False),
    "dapo": VerlBundle(True, "vanilla", "token-mean", 0.2, 0.28, 10.0, False, True, True),
    "clip_cov": VerlBundle(True, "clip_cov", "token-mean", 1.0, 1.0, 10.0, False, True, True,
                           {"clip_cov_ratio": 0.0002, "clip_cov_lb": 1.0, "clip_cov_ub": 5.0}),
    "kl_cov": VerlBundle(True, "kl_cov", "token-mean", 0.2, 0.28, 10.0, False, True, True,
                         {"kl_cov_ratio": 0.002, "ppo_kl_coef": 1.0}),
}


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


def _finite(value: float | str) -> float:
    number = math.inf if value == "inf" else float(value)
    return UNCLIPPED if math.isinf(number) else number


def resolve_algorithm(s: VerlSettings) -> VerlAlgorithm:
    """The cell's bundle with its explicit settings applied (see the module docstring)."""
    b = VERL_BUNDLES[s.baseline]
    low: float | str = b.clip_ratio_low
    high: float | str = b.clip_ratio_high
    c: float | str = b.clip_ratio_c
    if s.clip_ratio is not None:
        low = high = s.clip_ratio
        # verl reads clip_ratio_c separately: "no clipping" must also lift the dual clip.
        if s.clip_ratio == "inf":
            c = "inf"
    low = s.clip_ratio_low if s.clip_ratio_low is not None else low
    high = s.clip_ratio_high if s.clip_ratio_high is not None else high
    c = s.clip_ratio_c if s.clip_ratio_c is not None else c
    if s.use_kl_loss is not None:
        use_kl = s.use_kl_loss
    elif s.kl_coef is not None:
        use_kl = s.kl_coef > 0
    else:
        use_kl = b.use_kl_loss
    overlong = b.overlong_penalty if s.overlong_penalty is None else s.overlong_penalty
    return VerlAlgorithm(
        adv_estimator="reward_budget" if s.reward_budget else "grpo",
        normalise_by_std=b.normalise_by_std,
        loss_mode=b.loss_mode,
        loss_agg_mode=s.loss_agg_mode or b.loss_agg_mode,
        clip_ratio_low=_finite(low),
        clip_ratio_high=_finite(high),
        clip_ratio_c=_finite(c),
        use_kl_loss=use_kl,
        kl_coef=(s.kl_coef if s.kl_coef is not None else 0.001) if use_kl else 0.0,
        kl_loss_type=s.kl_loss_type,
        dynamic_sampling=b.dynamic_sampling if s.dynamic_sampling is None
        else s.dynamic_sampling,
        overlong_penalty=overlong,
        overlong_buffer=s.overlong_buffer,
        policy_loss_params=dict(b.policy_loss_params),
    )
