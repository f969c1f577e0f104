"""Settings of one embedded-trainer cell: the fully resolved config ``kappa train`` reads.

A spec's ``base`` plus its axis values produce a mapping that must validate against
:class:`EmbeddedSettings`. Settings left at ``None`` take the baseline bundle's value
(ALGORITHMS.md §2); :attr:`EmbeddedSettings.algorithm` resolves them, so the trainer never
looks at a ``None``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Baseline = Literal["grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov"]
AggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
ClipRatio = float | Literal["inf"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSettings(_Strict):
    """The tiny causal transformer."""

    d_model: int = Field(64, ge=8, le=4096)
    n_layers: int = Field(2, ge=1, le=48)
    n_heads: int = Field(4, ge=1, le=64)
    context_length: int = Field(48, ge=8, le=4096, description="Longest prompt + response.")

    @model_validator(mode="after")
    def _heads_divide(self) -> ModelSettings:
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        return self


class WarmStartSettings(_Strict):
    """Supervised warm start that brings the policy to partial accuracy before RL."""

    steps: int = Field(600, ge=0)
    batch_size: int = Field(64, ge=1)
    learning_rate: float = Field(3e-3, gt=0)
    target_accuracy: float | None = Field(
        0.4, gt=0, le=1,
        description="Stop early once greedy accuracy on a training-distribution probe set "
                    "reaches this (checked every 25 steps); None = run all steps.")


@dataclass(frozen=True)
class ResolvedAlgorithm:
    """Every algorithmic choice of a cell, with baseline defaults filled in."""

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


# ALGORITHMS.md §2 / VERL_NOTES §1: the bundle each baseline names.
_BUNDLES: dict[str, dict[str, object]] = {
    "grpo": dict(advantage="grpo", loss="vanilla", agg="token-mean", low=0.2, high=0.2,
                 kl=True, dyn=False, overlong=False),
    "drgrpo": dict(advantage="drgrpo", loss="vanilla", agg="seq-mean-token-sum-norm",
                   low=0.2, high=0.2, kl=False, dyn=False, overlong=False),
    "gspo": dict(advantage="grpo", loss="gspo", agg="seq-mean-token-mean", low=3e-4,
                 high=4e-4, kl=False, dyn=False, overlong=False),
    "dapo": dict(advantage="grpo", loss="vanilla", agg="token-mean", low=0.2, high=0.28,
                 kl=False, dyn=True, overlong=True),
    "clip_cov": dict(advantage="grpo", loss="clip_cov", agg="token-mean", low=0.2, high=0.28,
                     kl=False, dyn=True, overlong=True),
    "kl_cov": dict(advantage="grpo", loss="kl_cov", agg="token-mean", low=0.2, high=0.28,
                   kl=False, dyn=True, overlong=True),
}


def _as_ratio(value: ClipRatio) -> float:
    return math.inf if value == "inf" else float(value)


class EmbeddedSettings(_Strict):
    """One cell of the embedded backend. Unknown keys are errors."""

    # --- what to learn ---------------------------------------------------------------
    task: str = "arithmetic"
    benchmarks: tuple[str, ...] | None = Field(
        None, description="Benchmarks to evaluate; None = every level the task defines.")
    model: ModelSettings = ModelSettings()
    warm_start: WarmStartSettings = WarmStartSettings()

    # --- the RL algorithm --------------------------------------------------------------
    baseline: Baseline = "grpo"
    reward_budget: bool = False
    advantage_std: Literal["unbiased", "population"] = "unbiased"
    loss_agg_mode: AggMode | None = None
    clip_ratio: ClipRatio | None = Field(
        None, description="Shorthand for clip_ratio_low = clip_ratio_high; 'inf' = no clipping.")
    clip_ratio_low: ClipRatio | None = None
    clip_ratio_high: ClipRatio | None = None
    clip_ratio_c: float = Field(3.0, gt=1.0)
    use_kl_loss: bool | None = None
    kl_coef: float | None = Field(None, ge=0)
    kl_loss_type: Literal["k1", "low_var_kl"] = "low_var_kl"
    dynamic_sampling: bool | None = None
    overlong_buffer: int = Field(4, ge=0, description="DAPO L_cache: soft-penalty zone (tokens).")
    overlong_penalty_factor: float = Field(1.0, ge=0)
    max_sampling_attempts: int = Field(
        4, ge=1, description="DAPO dynamic sampling: most generation rounds per step.")

    # --- rewards (κ setting, spurious rewards) -----------------------------------------
    reward_type: Literal["verifier", "random"] = "verifier"
    reward_correct: float = 1.0
    reward_incorrect: float = 0.0

    # --- entropy interventions -----------------------------------------------------------
    entropy_intervention: Literal["none", "entropy_loss", "entropy_reward"] = "none"
    entropy_coef: float = Field(0.01, ge=0)
    intervention_steps: int | None = Field(
        None, ge=0, description="Intervention active for steps < N; None = the whole run.")

    # --- sampling and optimisation -------------------------------------------------------
    group_size: int = Field(8, ge=2)
    prompts_per_step: int = Field(32, ge=1)
    max_steps: int = Field(100, ge=1)
    learning_rate: float = Field(1e-4, gt=0)
    ppo_mini_batches: int = Field(2, ge=1, description="Optimizer steps per RL step.")
    ppo_epochs: int = Field(1, ge=1)
    grad_clip: float = Field(1.0, gt=0)
    temperature: float = Field(1.0, gt=0)
    max_response_length: int = Field(24, ge=1)

    # --- evaluation, checkpoints, run ----------------------------------------------------
    val_every: int = Field(10, ge=1)
    val_size: int = Field(128, ge=1)
    eval_samples: int = Field(8, ge=1, description="k of mean@k / pass@k at the end.")
    eval_temperature: float = Field(0.7, gt=0)
    checkpoint_every: int = Field(20, ge=1)
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        from orchestrator.backends.embedded.tasks import TASKS

        if value not in TASKS:
            raise ValueError(f"unknown task {value!r}; known: {', '.join(sorted(TASKS))}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> EmbeddedSettings:
        # Collect every cross-field problem so the user sees them all at once.
        problems: list[str] = []
        if self.clip_ratio is not None and (
            self.clip_ratio_low is not None or self.clip_ratio_high is not None
        ):
            problems.append("give clip_ratio or clip_ratio_low/clip_ratio_high, not both")
        for name in ("clip_ratio", "clip_ratio_low", "clip_ratio_high"):
            value = getattr(self, name)
            if value is not None and value != "inf" and float(value) <= 0:
                problems.append(f"{name} must be > 0 or 'inf' (found {value})")
        if self.prompts_per_step % self.ppo_mini_batches:
            problems.append(
                f"prompts_per_step ({self.prompts_per_step}) must be divisible by "
                f"ppo_mini_batches ({self.ppo_mini_batches})")
        if self.reward_correct <= self.reward_incorrect:
            problems.append("reward_correct must be greater than reward_incorrect")
        problems += self._task_problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _task_problems(self) -> list[str]:
        from orchestrator.backends.embedded.tasks import TASKS

        task = TASKS[self.task]
        problems = []
        unknown = sorted(set(self.benchmarks or ()) - set(task.benchmarks))
        if unknown:
            problems.append(f"unknown benchmark(s) {', '.join(unknown)} for task {self.task!r}; "
                            f"known: {', '.join(task.benchmarks)}")
        # BOS + longest prompt + response must fit the position table.
        needed = 1 + task.max_prompt_length + self.max_response_length
        if needed > self.model.context_length:
            problems.append(
                f"model.context_length ({self.model.context_length}) is shorter than BOS + the "
                f"task's longest prompt + max_response_length ({needed})")
        return problems

    @cached_property
    def algorithm(self) -> ResolvedAlgorithm:
        """The baseline bundle with this cell's overrides applied (derived, never stored)."""
        b = _BUNDLES[self.baseline]
        low: ClipRatio = b["low"]  # type: ignore[assignment]
        high: ClipRatio = b["high"]  # type: ignore[assignment]
        if self.clip_ratio is not None:
            low = high = self.clip_ratio
        low = self.clip_ratio_low if self.clip_ratio_low is not None else low
        high = self.clip_ratio_high if self.clip_ratio_high is not None else high
        # A κ setting names β explicitly: giving kl_coef turns the KL loss on unless
        # use_kl_loss says otherwise.
        if self.use_kl_loss is not None:
            use_kl = self.use_kl_loss
        elif self.kl_coef is not None:
            use_kl = self.kl_coef > 0
        else:
            use_kl = bool(b["kl"])
        return ResolvedAlgorithm(
            advantage="reward_budget" if self.reward_budget else str(b["advantage"]),
            advantage_std=self.advantage_std,
            loss=str(b["loss"]),
            loss_agg_mode=self.loss_agg_mode or str(b["agg"]),
            clip_ratio_low=_as_ratio(low),
            clip_ratio_high=_as_ratio(high),
            clip_ratio_c=self.clip_ratio_c,
            use_kl_loss=use_kl,
            kl_coef=(self.kl_coef if self.kl_coef is not None else 0.001) if use_kl else 0.0,
            kl_loss_type=self.kl_loss_type,
            dynamic_sampling=bool(b["dyn"]) if self.dynamic_sampling is None
            else self.dynamic_sampling,
            overlong_penalty=bool(b["overlong"]),
        )

    def intervention_active(self, step: int) -> bool:
        """Whether the entropy intervention applies at RL step ``step`` (0-based)."""
        if self.entropy_intervention == "none":
            return False
        return self.intervention_steps is None or step < self.intervention_steps
