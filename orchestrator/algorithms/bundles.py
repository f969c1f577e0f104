"""The six baseline bundles, every recipe constant in one table
(docs/algorithms.md#baseline-bundles; ``on_verl`` where verl's recipes differ), and :func:`resolve`,
which applies a cell's explicit settings into the one :class:`ResolvedAlgorithm` both backends run.
Pure Python: no torch."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypedDict

Backend = Literal["embedded", "verl"]

# The κ study's β when a cell turns the KL loss on without naming a coefficient.
DEFAULT_KL_COEF = 0.001


class VerlChanges(TypedDict, total=False):
    """What verl's recipe changes in a bundle (typed, so a misspelt key fails mypy)."""

    clip_ratio_low: float
    clip_ratio_high: float
    clip_ratio_c: float


@dataclass(frozen=True)
class Bundle:
    """One baseline's algorithmic choices before a cell's overrides."""

    advantage: str  # grpo | drgrpo
    loss: str  # vanilla | gspo | clip_cov | kl_cov
    loss_agg_mode: str
    clip_ratio_low: float
    clip_ratio_high: float
    clip_ratio_c: float
    use_kl_loss: bool = False
    dynamic_sampling: bool = False
    overlong_penalty: bool = False
    policy_loss_params: Mapping[str, float] = field(default_factory=dict)
    on_verl: VerlChanges = field(default_factory=VerlChanges)

    def on(self, backend: Backend) -> Bundle:
        """This bundle as ``backend`` runs it."""
        return dataclasses.replace(self, **self.on_verl) if backend == "verl" else self


_VERL_DUAL_CLIP: VerlChanges = {"clip_ratio_c": 10.0}


def _dapo_family(loss: str, params: Mapping[str, float] | None = None,
                 on_verl: VerlChanges = _VERL_DUAL_CLIP) -> Bundle:
    return Bundle("grpo", loss, "token-mean", 0.2, 0.28, 3.0, dynamic_sampling=True,
                  overlong_penalty=True, policy_loss_params=params or {}, on_verl=on_verl)


BUNDLES: dict[str, Bundle] = {
    "grpo": Bundle("grpo", "vanilla", "token-mean", 0.2, 0.2, 3.0, use_kl_loss=True),
    "drgrpo": Bundle("drgrpo", "vanilla", "seq-mean-token-sum-norm", 0.2, 0.2, 3.0),
    "gspo": Bundle("grpo", "gspo", "seq-mean-token-mean", 3e-4, 4e-4, 3.0,
                   on_verl=_VERL_DUAL_CLIP),
    "dapo": _dapo_family("vanilla"),
    "clip_cov": _dapo_family(
        "clip_cov", {"clip_cov_ratio": 2e-4, "clip_cov_lb": 1.0, "clip_cov_ub": 5.0},
        {**_VERL_DUAL_CLIP, "clip_ratio_low": 1.0, "clip_ratio_high": 1.0}),
    "kl_cov": _dapo_family("kl_cov", {"kl_cov_ratio": 2e-3, "ppo_kl_coef": 1.0}),
}


@dataclass(frozen=True)
class ResolvedAlgorithm:
    """Every algorithmic choice of a cell, its bundle's defaults filled in (clip ratios are
    floats; no clipping, ``'inf'``, is ``math.inf``)."""

    advantage: str  # grpo | drgrpo | reward_budget
    advantage_std: str  # GRPO's group std: unbiased | population
    normalise_by_std: bool  # the bundle's construction divides by the group std (not Dr.GRPO)
    loss: str  # vanilla | gspo | clip_cov | kl_cov
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
    policy_loss_params: Mapping[str, float]


Ratio = float | str  # a number, or the word 'inf'


def resolve(
    bundle: Bundle, *, reward_budget: bool, advantage_std: str, loss_agg_mode: str | None,
    clip_ratio: Ratio | None, clip_ratio_low: Ratio | None, clip_ratio_high: Ratio | None,
    clip_ratio_c: Ratio | None, use_kl_loss: bool | None, kl_coef: float | None,
    dynamic_sampling: bool | None, overlong_penalty: bool | None, kl_loss_type: str,
    overlong_buffer: int,
) -> ResolvedAlgorithm:
    """``bundle`` with a cell's explicit settings applied (``None``: the bundle's). ``clip_ratio``
    sets both ratios, ``clip_ratio_low``/``_high`` win over it, and ``clip_ratio: inf`` lifts the
    dual clip too unless ``clip_ratio_c`` is given. Giving ``kl_coef`` turns the KL loss on unless
    ``use_kl_loss`` says otherwise."""
    low: Ratio = bundle.clip_ratio_low
    high: Ratio = bundle.clip_ratio_high
    c: Ratio = bundle.clip_ratio_c
    if clip_ratio is not None:
        low = high = clip_ratio
        c = "inf" if clip_ratio == "inf" else c
    low = low if clip_ratio_low is None else clip_ratio_low
    high = high if clip_ratio_high is None else clip_ratio_high
    c = c if clip_ratio_c is None else clip_ratio_c
    if use_kl_loss is None:
        use_kl_loss = kl_coef > 0 if kl_coef is not None else bundle.use_kl_loss
    return ResolvedAlgorithm(
        advantage="reward_budget" if reward_budget else bundle.advantage,
        advantage_std=advantage_std, normalise_by_std=bundle.advantage != "drgrpo",
        loss=bundle.loss, loss_agg_mode=loss_agg_mode or bundle.loss_agg_mode,
        clip_ratio_low=float(low), clip_ratio_high=float(high), clip_ratio_c=float(c),
        use_kl_loss=use_kl_loss,
        kl_coef=(DEFAULT_KL_COEF if kl_coef is None else kl_coef) if use_kl_loss else 0.0,
        kl_loss_type=kl_loss_type,
        dynamic_sampling=bundle.dynamic_sampling if dynamic_sampling is None
        else dynamic_sampling,
        overlong_penalty=bundle.overlong_penalty if overlong_penalty is None
        else overlong_penalty,
        overlong_buffer=overlong_buffer, policy_loss_params=dict(bundle.policy_loss_params))
