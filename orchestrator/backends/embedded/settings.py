"""Settings of one embedded-trainer cell: the fully resolved config ``kappa train`` reads (a
spec's ``base`` plus its axis values). Settings left at ``None`` take the baseline bundle's
value: :attr:`EmbeddedSettings.algorithm` resolves them, so the trainer never sees a ``None``."""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import Field, field_validator, model_validator

from orchestrator.algorithms.bundles import ResolvedAlgorithm
from orchestrator.backends.rl_settings import LearningRate, RLSettings, StrictModel
from orchestrator.limits import (
    MAX_ATTEMPTS,
    MAX_BATCH,
    MAX_EVAL_PROMPTS,
    MAX_GROUP_SIZE,
    MAX_SCALE,
    MAX_SEED,
    MAX_STEPS,
    MAX_TOKENS,
)


class ModelSettings(StrictModel):
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


class WarmStartSettings(StrictModel):
    """Supervised warm start that brings the policy to partial accuracy before RL."""

    seed: int = Field(
        0, ge=0, le=MAX_SEED,
        description="Seed of the base model (its init and supervised data). Shared by every "
                    "RL seed, as one pretrained checkpoint is; put it on an axis to vary it.")
    steps: int = Field(600, ge=0, le=MAX_STEPS)
    batch_size: int = Field(64, ge=1, le=MAX_BATCH)
    learning_rate: LearningRate = 3e-3
    target_accuracy: float | None = Field(
        0.4, gt=0, le=1,
        description="Stop early once greedy accuracy on a training-distribution probe set "
                    "reaches this (checked every 25 steps); None = run all steps.")


class EmbeddedSettings(RLSettings):
    """One cell of the embedded backend. Unknown keys are errors."""

    # The shared RL-algorithm, reward, entropy and sampling fields are RLSettings'; those
    # below are the embedded trainer's own (the docstring above is the schema's text).

    # --- what to learn ---------------------------------------------------------------
    task: str = "arithmetic"
    benchmarks: tuple[str, ...] | None = Field(
        None, description="Benchmarks to evaluate; None = every level the task defines.")
    model: ModelSettings = ModelSettings()
    warm_start: WarmStartSettings = WarmStartSettings()

    # --- the RL algorithm (embedded-only parts) ----------------------------------------
    kl_loss_type: Literal["k1", "low_var_kl"] = "low_var_kl"
    overlong_buffer: int = Field(
        4, ge=0, le=MAX_TOKENS, description="DAPO L_cache: soft-penalty zone (tokens).")
    max_sampling_attempts: int = Field(
        4, ge=1, le=MAX_ATTEMPTS,
        description="DAPO dynamic sampling: most generation rounds per step.")

    # --- optimisation --------------------------------------------------------------------
    max_steps: int = Field(100, ge=1, le=MAX_STEPS)
    learning_rate: LearningRate = 1e-4
    ppo_mini_batches: int = Field(2, ge=1, le=MAX_BATCH, description="Optimizer steps per RL step.")
    grad_clip: float = Field(1.0, gt=0)
    max_response_length: int = Field(24, ge=1, le=MAX_TOKENS)

    # --- evaluation, checkpoints, run ----------------------------------------------------
    val_every: int = Field(10, ge=1, le=MAX_STEPS)
    val_size: int = Field(128, ge=1, le=MAX_EVAL_PROMPTS)
    eval_samples: int = Field(
        8, ge=1, le=MAX_GROUP_SIZE, description="k of mean@k / pass@k at the end.")
    # Divides the logits, as temperature does (RLSettings): the same float32 bounds.
    eval_temperature: float = Field(0.7, ge=1 / MAX_SCALE, le=MAX_SCALE)
    checkpoint_every: int = Field(20, ge=1, le=MAX_STEPS)
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
        from orchestrator.backends.embedded.tasks import TASKS

        # Collect every cross-field problem so the user sees them all at once.
        problems = self.clip_problems()
        if self.prompts_per_step % self.ppo_mini_batches:
            problems.append(
                f"prompts_per_step ({self.prompts_per_step}) must be divisible by "
                f"ppo_mini_batches ({self.ppo_mini_batches})")
        problems += self.reward_problems()
        task = TASKS[self.task]
        if unknown := sorted(set(self.benchmarks or ()) - set(task.benchmarks)):
            problems.append(f"unknown benchmark(s) {', '.join(unknown)} for task {self.task!r}; "
                            f"known: {', '.join(task.benchmarks)}")
        # BOS + longest prompt + response must fit the position table.
        needed = 1 + task.max_prompt_length + self.max_response_length
        if needed > self.model.context_length:
            problems.append(
                f"model.context_length ({self.model.context_length}) is shorter than BOS + the "
                f"task's longest prompt + max_response_length ({needed})")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @cached_property
    def algorithm(self) -> ResolvedAlgorithm:
        """The baseline bundle with this cell's overrides applied (derived, never stored)."""
        return self.resolve_algorithm("embedded", kl_loss_type=self.kl_loss_type,
                                      overlong_buffer=self.overlong_buffer)
