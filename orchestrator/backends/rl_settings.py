"""The RL-algorithm settings both backends share, and the baseline bundles they resolve against.

:class:`RLSettings` is the strict, frozen field block that
:class:`~orchestrator.backends.embedded.settings.EmbeddedSettings` and
:class:`~orchestrator.backends.verl.settings.VerlSettings` inherit, so a spec's algorithm
axes (``baseline``, ``reward_budget``, ``clip_ratio``, ``kl_coef``, ``group_size`` ...)
mean the same on either backend. Settings left at ``None`` take the baseline bundle's value
(ALGORITHMS.md §2); :func:`resolve_bundle` applies a cell's overrides to a bundle. A
backend whose bundles differ (verl, VERL_NOTES §1) states the differences as data with
:func:`bundles_with`, never as a second copy of the resolution.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypedDict

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator

from orchestrator.limits import (
    MAX_ATTEMPTS,
    MAX_BATCH,
    MAX_GROUP_SIZE,
    MAX_SEED,
    MAX_STEPS,
)

Baseline = Literal["grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov"]
AggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


def _inf_as_word(value: Any) -> Any:
    """YAML's ``.inf`` (a float) and the word ``inf`` are one setting: ``'inf'``.

    Without this the two spellings validate to different values, so the same cell gets
    two ids, and the float's JSON (``Infinity``) is not JSON.
    """
    if isinstance(value, float) and value == math.inf:
        return "inf"
    return value


ClipRatio = Annotated[float | Literal["inf"], BeforeValidator(_inf_as_word)]

# The κ study's β when a cell turns the KL loss on without naming a coefficient.
DEFAULT_KL_COEF = 0.001


def _admits(annotation: Any, kinds: tuple[type, ...]) -> bool:
    """Whether a field's type admits a value of one of ``kinds`` (through unions)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Annotated:
        return _admits(args[0], kinds)
    if origin in (typing.Union, types.UnionType):
        return any(_admits(a, kinds) for a in args)
    if origin is Literal:
        return any(type(a) in kinds for a in args)
    return annotation in kinds


class StrictModel(BaseModel):
    """A settings model: unknown keys are errors and instances never change."""

    # No setting is meaningfully NaN or infinite (an unclipped ratio is the word 'inf'):
    # refusing them keeps settings valid JSON and cell ids well defined.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_as_number(cls, value: Any, info: ValidationInfo) -> Any:
        # Pydantic reads True as 1: `seed: true` or `group_size: yes` would quietly run
        # as 1. A number setting takes numbers only.
        if isinstance(value, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            if _admits(annotation, (int, float)) and not _admits(annotation, (bool,)):
                raise ValueError("a boolean is not a number here")
        return value


@dataclass(frozen=True)
class Bundle:
    """One baseline's algorithmic choices before a cell's overrides."""

    advantage: str  # grpo | drgrpo
    loss: str  # vanilla | gspo | clip_cov | kl_cov
    loss_agg_mode: str
    clip_ratio_low: float
    clip_ratio_high: float
    clip_ratio_c: float
    use_kl_loss: bool
    dynamic_sampling: bool
    overlong_penalty: bool
    policy_loss_params: Mapping[str, float] = field(default_factory=dict)


class BundleChanges(TypedDict, total=False):
    """What a backend may change in a bundle (typed, so a misspelt key fails mypy)."""

    clip_ratio_low: float
    clip_ratio_high: float
    clip_ratio_c: float
    policy_loss_params: Mapping[str, float]


def _dapo_family(loss: str) -> Bundle:
    return Bundle("grpo", loss, "token-mean", 0.2, 0.28, 3.0, use_kl_loss=False,
                  dynamic_sampling=True, overlong_penalty=True)


# ALGORITHMS.md §2: the bundle each baseline names (dual clip c = 3 throughout).
BUNDLES: dict[str, Bundle] = {
    "grpo": Bundle("grpo", "vanilla", "token-mean", 0.2, 0.2, 3.0, use_kl_loss=True,
                   dynamic_sampling=False, overlong_penalty=False),
    "drgrpo": Bundle("drgrpo", "vanilla", "seq-mean-token-sum-norm", 0.2, 0.2, 3.0,
                     use_kl_loss=False, dynamic_sampling=False, overlong_penalty=False),
    "gspo": Bundle("grpo", "gspo", "seq-mean-token-mean", 3e-4, 4e-4, 3.0, use_kl_loss=False,
                   dynamic_sampling=False, overlong_penalty=False),
    "dapo": _dapo_family("vanilla"),
    "clip_cov": _dapo_family("clip_cov"),
    "kl_cov": _dapo_family("kl_cov"),
}


def bundles_with(changes: Mapping[str, BundleChanges]) -> dict[str, Bundle]:
    """:data:`BUNDLES` with a backend's per-baseline differences applied."""
    unknown = sorted(set(changes) - set(BUNDLES))
    if unknown:
        raise KeyError(f"changes for unknown baseline(s) {unknown}; known: {sorted(BUNDLES)}")
    return {name: dataclasses.replace(bundle, **changes.get(name, {}))
            for name, bundle in BUNDLES.items()}


@dataclass(frozen=True)
class ResolvedAlgorithm:
    """Every algorithmic choice of a cell, with baseline defaults filled in.

    Clip ratios are floats; ``'inf'`` became ``math.inf``.
    """

    advantage: str  # grpo | drgrpo | reward_budget
    advantage_std: str
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


def as_ratio(value: ClipRatio) -> float:
    """A clip ratio setting as a float (``'inf'`` is ``math.inf``)."""
    return math.inf if value == "inf" else float(value)


class RLSettings(StrictModel):
    """The RL-algorithm fields both backends share. Backends add their own fields."""

    # --- the RL algorithm --------------------------------------------------------------
    baseline: Baseline = "grpo"
    reward_budget: bool = False
    advantage_std: Literal["unbiased", "population"] = "unbiased"
    loss_agg_mode: AggMode | None = None
    clip_ratio: ClipRatio | None = Field(
        None, description="Shorthand for clip_ratio_low = clip_ratio_high; 'inf' = no clipping.")
    clip_ratio_low: ClipRatio | None = None
    clip_ratio_high: ClipRatio | None = None
    clip_ratio_c: ClipRatio | None = Field(
        None, description="Dual-clip constant (> 1); None = the bundle's (3, or 10 on verl for "
                          "GSPO and the DAPO family), and 'inf' when clip_ratio is 'inf': no "
                          "clipping lifts the dual clip too.")
    use_kl_loss: bool | None = None
    kl_coef: float | None = Field(None, ge=0)
    dynamic_sampling: bool | None = None
    overlong_penalty_factor: float = Field(1.0, ge=0)

    # --- rewards (κ setting, spurious rewards) -----------------------------------------
    reward_type: Literal["verifier", "random"] = "verifier"
    reward_correct: float = 1.0
    reward_incorrect: float = 0.0

    # --- entropy interventions -----------------------------------------------------------
    entropy_intervention: Literal["none", "entropy_loss", "entropy_reward"] = "none"
    entropy_coef: float = Field(0.01, ge=0)
    intervention_steps: int | None = Field(
        None, ge=0, le=MAX_STEPS,
        description="Intervention active for steps < N; None = the whole run.")

    # --- sampling ------------------------------------------------------------------------
    group_size: int = Field(8, ge=2, le=MAX_GROUP_SIZE)
    prompts_per_step: int = Field(32, ge=1, le=MAX_BATCH)
    ppo_epochs: int = Field(1, ge=1, le=MAX_ATTEMPTS)
    temperature: float = Field(1.0, gt=0)
    seed: int = Field(0, ge=0, le=MAX_SEED)

    def clip_problems(self) -> list[str]:
        """What is wrong with the clip-ratio settings (empty when nothing is)."""
        problems: list[str] = []
        if self.clip_ratio is not None and (
            self.clip_ratio_low is not None or self.clip_ratio_high is not None
        ):
            problems.append("give clip_ratio or clip_ratio_low/clip_ratio_high, not both")
        for name in ("clip_ratio", "clip_ratio_low", "clip_ratio_high"):
            value = getattr(self, name)
            if value is not None and value != "inf" and float(value) <= 0:
                problems.append(f"{name} must be > 0 or 'inf' (found {value})")
        if self.clip_ratio_c not in (None, "inf") and float(self.clip_ratio_c) <= 1.0:
            problems.append(f"clip_ratio_c must be > 1 or 'inf' (found {self.clip_ratio_c})")
        return problems

    def reward_problems(self) -> list[str]:
        """What is wrong with the reward settings (empty when nothing is)."""
        if self.reward_correct <= self.reward_incorrect:
            return ["reward_correct must be greater than reward_incorrect"]
        return []

    def intervention_active(self, step: int) -> bool:
        """Whether the entropy intervention applies at RL step ``step`` (0-based)."""
        if self.entropy_intervention == "none":
            return False
        return self.intervention_steps is None or step < self.intervention_steps


# A canary run's length: the first step, and a second one on the updated policy (whose
# ratios have moved off 1, so clipping and the KL term really act).
CANARY_STEPS = 2


def canary_intervention_steps(steps: int | None, max_steps: int, canary_steps: int) -> int | None:
    """``intervention_steps`` of a canary ``canary_steps`` long: an intervention that ends
    before ``max_steps`` still ends before the canary does (so a two-phase cell stays two
    phases); one that never ends, or is off from the start, stays so."""
    if steps is None or steps == 0:
        return steps
    if steps >= max_steps:
        return canary_steps
    return max(1, canary_steps - 1)


def resolve_bundle(s: RLSettings, bundle: Bundle, *, kl_loss_type: str,
                   overlong_penalty: bool | None = None) -> ResolvedAlgorithm:
    """``bundle`` with the cell's explicit settings applied.

    ``clip_ratio`` sets both ratios and ``clip_ratio_low`` / ``clip_ratio_high`` win over
    it. ``clip_ratio: inf`` also lifts the dual clip unless ``clip_ratio_c`` is given, since
    a dual clip would still bound the ratio. A κ setting names β explicitly: giving
    ``kl_coef`` turns the KL loss on unless ``use_kl_loss`` says otherwise.
    """
    low: ClipRatio = bundle.clip_ratio_low
    high: ClipRatio = bundle.clip_ratio_high
    c: ClipRatio = bundle.clip_ratio_c
    if s.clip_ratio is not None:
        low = high = s.clip_ratio
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
        use_kl = bundle.use_kl_loss
    kl_coef = s.kl_coef if s.kl_coef is not None else DEFAULT_KL_COEF
    return ResolvedAlgorithm(
        advantage="reward_budget" if s.reward_budget else bundle.advantage,
        advantage_std=s.advantage_std,
        loss=bundle.loss,
        loss_agg_mode=s.loss_agg_mode or bundle.loss_agg_mode,
        clip_ratio_low=as_ratio(low),
        clip_ratio_high=as_ratio(high),
        clip_ratio_c=as_ratio(c),
        use_kl_loss=use_kl,
        kl_coef=kl_coef if use_kl else 0.0,
        kl_loss_type=kl_loss_type,
        dynamic_sampling=bundle.dynamic_sampling if s.dynamic_sampling is None
        else s.dynamic_sampling,
        overlong_penalty=bundle.overlong_penalty if overlong_penalty is None
        else overlong_penalty,
    )
