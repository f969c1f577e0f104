"""The RL-algorithm settings both backends inherit (:class:`RLSettings`): an algorithm axis means
the same on either; ``None`` takes the baseline bundle's (docs/algorithms.md#baseline-bundles)."""

from __future__ import annotations

import math
import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator

from orchestrator.algorithms.bundles import BUNDLES, Backend, ResolvedAlgorithm, resolve
from orchestrator.backends.validation import union_members
from orchestrator.limits import (
    MAX_ATTEMPTS,
    MAX_BATCH,
    MAX_GROUP_SIZE,
    MAX_SCALE,
    MAX_SEED,
    MAX_STEPS,
)

Baseline = Literal["grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov"]
AggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


def _inf_as_word(value: Any) -> Any:
    """YAML's ``.inf`` (a float) and the word ``inf`` are one setting: ``'inf'`` (else the
    same cell would get two ids, and the float's JSON, ``Infinity``, is not JSON)."""
    return "inf" if isinstance(value, float) and value == math.inf else value


ClipRatio = Annotated[float | Literal["inf"], BeforeValidator(_inf_as_word)]

# Adam(W) normalises each update to about 1 (at most ~3 with the default betas), so a
# step moves every weight by about the learning rate: a rate is a scale like the others
# (limits.MAX_SCALE). Past it, float32 weights lose what training adds to them in
# rounding; at 1e39 (no float32) the first update overflowed.
MAX_LEARNING_RATE = MAX_SCALE


def check_learning_rate(value: object) -> object:
    """Refuse a learning rate past :data:`MAX_LEARNING_RATE`, saying why and what to use
    (pydantic's own "less than or equal to" says neither)."""
    if isinstance(value, int | float) and not isinstance(value, bool) \
            and value > MAX_LEARNING_RATE:
        raise ValueError(
            f"more than float32 training can take (an optimizer step moves each weight by "
            f"about the learning rate): use at most {MAX_LEARNING_RATE:g}; usual rates are "
            f"1e-6 .. 1e-2")
    return value


LearningRate = Annotated[float, Field(gt=0, le=MAX_LEARNING_RATE),
                         BeforeValidator(check_learning_rate)]


def _admits(annotation: Any, kinds: tuple[type, ...]) -> bool:
    """Whether a field's type admits a value of one of ``kinds`` (through unions)."""
    return any(m in kinds or (typing.get_origin(m) is Literal
                              and any(type(a) in kinds for a in typing.get_args(m)))
               for m in union_members(annotation))


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
    # Every number that scales a reward or a loss is bounded by what float32 training
    # holds (limits.MAX_SCALE): 1e39 passed, and was infinite at step 1.
    kl_coef: float | None = Field(None, ge=0, le=MAX_SCALE)
    dynamic_sampling: bool | None = None
    overlong_penalty_factor: float = Field(1.0, ge=0, le=MAX_SCALE)

    # --- rewards (κ setting, spurious rewards) -----------------------------------------
    reward_type: Literal["verifier", "random"] = "verifier"
    reward_correct: float = Field(1.0, ge=-MAX_SCALE, le=MAX_SCALE)
    reward_incorrect: float = Field(0.0, ge=-MAX_SCALE, le=MAX_SCALE)

    # --- entropy interventions -----------------------------------------------------------
    entropy_intervention: Literal["none", "entropy_loss", "entropy_reward"] = "none"
    entropy_coef: float = Field(0.01, ge=0, le=MAX_SCALE)
    intervention_steps: int | None = Field(
        None, ge=0, le=MAX_STEPS,
        description="Intervention active for steps < N; None = the whole run.")

    # --- sampling ------------------------------------------------------------------------
    group_size: int = Field(8, ge=2, le=MAX_GROUP_SIZE)
    prompts_per_step: int = Field(32, ge=1, le=MAX_BATCH)
    ppo_epochs: int = Field(1, ge=1, le=MAX_ATTEMPTS)
    # Logits are divided by it: below 1/MAX_SCALE they overflow float32.
    temperature: float = Field(1.0, ge=1 / MAX_SCALE, le=MAX_SCALE)
    seed: int = Field(0, ge=0, le=MAX_SEED)

    def clip_problems(self) -> list[str]:
        """What is wrong with the clip-ratio settings (empty when nothing is)."""
        problems: list[str] = []
        if self.clip_ratio is not None and (self.clip_ratio_low is not None
                                            or self.clip_ratio_high is not None):
            problems.append("give clip_ratio or clip_ratio_low/clip_ratio_high, not both")
        for name in ("clip_ratio", "clip_ratio_low", "clip_ratio_high"):
            value = getattr(self, name)
            if value is not None and value != "inf" and not 0 < float(value) <= MAX_SCALE:
                problems.append(f"{name} must be > 0 and <= {MAX_SCALE:g}, or 'inf' for no "
                                f"clipping (found {value})")
        if self.clip_ratio_c not in (None, "inf") and not 1.0 < float(self.clip_ratio_c) \
                <= MAX_SCALE:
            problems.append(f"clip_ratio_c must be > 1 and <= {MAX_SCALE:g}, or 'inf' "
                            f"(found {self.clip_ratio_c})")
        return problems

    def reward_problems(self) -> list[str]:
        """What is wrong with the reward settings (empty when nothing is)."""
        wrong = self.reward_correct <= self.reward_incorrect
        return ["reward_correct must be greater than reward_incorrect"] if wrong else []

    def resolve_algorithm(self, backend: Backend, *, kl_loss_type: str, overlong_buffer: int,
                          overlong_penalty: bool | None = None) -> ResolvedAlgorithm:
        """This cell's baseline bundle on ``backend`` with its explicit settings applied."""
        return resolve(
            BUNDLES[self.baseline].on(backend), reward_budget=self.reward_budget,
            advantage_std=self.advantage_std, loss_agg_mode=self.loss_agg_mode,
            clip_ratio=self.clip_ratio, clip_ratio_low=self.clip_ratio_low,
            clip_ratio_high=self.clip_ratio_high, clip_ratio_c=self.clip_ratio_c,
            use_kl_loss=self.use_kl_loss, kl_coef=self.kl_coef,
            dynamic_sampling=self.dynamic_sampling, overlong_penalty=overlong_penalty,
            kl_loss_type=kl_loss_type, overlong_buffer=overlong_buffer)

    def intervention_active(self, step: int) -> bool:
        """Whether the entropy intervention applies at RL step ``step`` (0-based)."""
        return self.entropy_intervention != "none" and (
            self.intervention_steps is None or step < self.intervention_steps)


# A canary run's length: the first step, and a second one on the updated policy (whose
# ratios have moved off 1, so clipping and the KL term really act).
CANARY_STEPS = 2


def canary_intervention_steps(steps: int | None, max_steps: int, canary_steps: int) -> int | None:
    """``intervention_steps`` of a canary ``canary_steps`` long: one ending before ``max_steps``
    still ends before the canary does (two phases stay two); never or from the start, stays."""
    if steps is None or steps == 0:
        return steps
    if steps >= max_steps:
        return canary_steps
    return max(1, canary_steps - 1)
