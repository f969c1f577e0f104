"""Settings of one verl cell: the RL-algorithm fields of
:class:`~orchestrator.backends.rl_settings.RLSettings` (resolved by
:attr:`VerlSettings.algorithm`) and verl's own: model, data, batch sizes, rollout, GPUs."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Literal

from pydantic import Field, field_validator, model_validator

from orchestrator.algorithms.bundles import ResolvedAlgorithm
from orchestrator.backends.rl_settings import LearningRate, RLSettings
from orchestrator.limits import (
    MAX_BATCH,
    MAX_GPUS_PER_CELL,
    MAX_GPUS_PER_NODE,
    MAX_GROUP_SIZE,
    MAX_NODES,
    MAX_SCALE,
    MAX_STEPS,
    MAX_TOKENS,
)

# key=value, +key=value, ++key=value or ~key[=value]: Hydra's override forms.
_OVERRIDE = re.compile(r"^(\+\+|\+|~)?[A-Za-z_][\w\-]*(\.[\w\-]+)*(=.*)?$", re.DOTALL)
# ${NAME}: a template's placeholder. Nothing between the spec and verl expands it (Hydra
# would even read it as an interpolation), so left in a path it fails only on the GPU node.
_PLACEHOLDER = re.compile(r"\$\{[^}]*\}")
SMOKE_PLACEHOLDER = "${KAPPA_SMOKE_DIR}"


class VerlSettings(RLSettings):
    """One cell of the verl backend. Unknown keys are errors."""

    # --- model and data ----------------------------------------------------------------
    model_path: str = Field(..., min_length=1, description="HF model id or local path.")
    train_files: tuple[str, ...] = Field(..., min_length=1)
    val_files: tuple[str, ...] = Field(..., min_length=1)
    max_prompt_length: int = Field(1024, ge=1, le=MAX_TOKENS)
    max_response_length: int = Field(8192, ge=1, le=MAX_TOKENS)

    # --- the RL algorithm (verl-only parts) -------------------------------------------------
    kl_loss_type: Literal["k1", "k2", "k3", "low_var_kl", "kl", "abs", "mse"] = "low_var_kl"
    overlong_penalty: bool | None = Field(
        None, description="DAPO soft over-long penalty; None = bundle.")
    overlong_buffer: int = Field(4096, ge=1, le=MAX_TOKENS, description="DAPO L_cache (tokens).")

    # --- optimisation --------------------------------------------------------------------------
    max_steps: int = Field(1000, ge=1, le=MAX_STEPS)
    learning_rate: LearningRate = 1e-6
    weight_decay: float = Field(0.1, ge=0, le=MAX_SCALE)
    ppo_mini_batch_size: int | None = Field(
        None, ge=1, le=MAX_BATCH,
        description="Prompts per optimizer step; None = prompts_per_step.")
    ppo_micro_batch_size_per_gpu: int = Field(1, ge=1, le=MAX_BATCH)
    log_prob_micro_batch_size_per_gpu: int = Field(4, ge=1, le=MAX_BATCH)

    # --- evaluation, checkpoints, run ----------------------------------------------------------
    val_every: int = Field(
        5, ge=1, le=MAX_STEPS, description="Validate on val_files every N steps.")
    val_samples: int = Field(
        1, ge=1, le=MAX_GROUP_SIZE, description="Samples per validation prompt.")
    val_temperature: float = Field(0.0, ge=0, le=MAX_SCALE, description="0 = greedy validation.")
    eval_files: tuple[str, ...] = Field(
        (), description="Benchmarks for a final evaluation phase (none if empty).")
    eval_samples: int = Field(
        8, ge=1, le=MAX_GROUP_SIZE, description="k of the final mean@k / pass@k.")
    eval_temperature: float = Field(0.7, ge=0, le=MAX_SCALE)
    checkpoint_every: int = Field(50, ge=1, le=MAX_STEPS)

    # --- verl resources ------------------------------------------------------------------------
    rollout_engine: Literal["vllm", "sglang"] = "vllm"
    tensor_parallel_size: int = Field(1, ge=1, le=MAX_GPUS_PER_NODE)
    gpu_memory_utilization: float = Field(0.6, gt=0, le=1)
    nnodes: int = Field(1, ge=1, le=MAX_NODES)
    n_gpus_per_node: int = Field(8, ge=1, le=MAX_GPUS_PER_NODE)

    # --- naming and escape hatches -------------------------------------------------------------
    project_name: str | None = Field(None, description="None = the sweep (run_dir's parent).")
    experiment_name: str | None = Field(None, description="None = the cell (run_dir's name).")
    python: str = Field("python3", min_length=1, description="Interpreter of verl's env.")
    reward_function_path: str | None = Field(
        None, description="kappa_verl/rewards.py; None = found from the installed plug-in.")
    extra_overrides: tuple[str, ...] = Field(
        (), description="Raw Hydra overrides appended last (escape hatch).")

    @field_validator("train_files", "val_files", "eval_files", "extra_overrides", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @field_validator("model_path", "train_files", "val_files", "eval_files",
                     "reward_function_path")
    @classmethod
    def _no_placeholder(cls, value: str | tuple[str, ...] | None) -> object:
        values = (value,) if isinstance(value, str) else value or ()
        found = sorted({m for v in values for m in _PLACEHOLDER.findall(v)})
        if not found:
            return value
        if SMOKE_PLACEHOLDER in found:
            raise ValueError(f"{SMOKE_PLACEHOLDER} is not filled in: this is the smoke-test "
                             "template; run `kappa smoke verl` (it builds the files and "
                             "fills in the path) instead of submitting it")
        raise ValueError(f"unexpanded placeholder {', '.join(found)}: kappa does not expand "
                         "variables in paths; replace the placeholder with the real path "
                         "(or set it in the spec)")

    @field_validator("extra_overrides")
    @classmethod
    def _override_form(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [o for o in value if not _OVERRIDE.match(o) or not (o.startswith("~") or "=" in o)]
        if bad:
            raise ValueError(f"not a Hydra override (key=value, +key=value, ~key): {bad}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> VerlSettings:
        problems = self.clip_problems() + self.reward_problems()
        mini = self.ppo_mini_batch_size or self.prompts_per_step
        if self.prompts_per_step % mini:
            problems.append(f"prompts_per_step ({self.prompts_per_step}) must be divisible by "
                            f"ppo_mini_batch_size ({mini})")
        world = self.nnodes * self.n_gpus_per_node
        if world > MAX_GPUS_PER_CELL:
            problems.append(f"nnodes × n_gpus_per_node ({self.nnodes} × {self.n_gpus_per_node}) "
                            f"is more than {MAX_GPUS_PER_CELL} GPUs for one cell")
        if (mini * self.group_size) % world:
            problems.append(
                f"ppo_mini_batch_size × group_size ({mini} × {self.group_size}) must be divisible "
                f"by the number of GPUs (nnodes × n_gpus_per_node = {world})")
        if self.n_gpus_per_node % self.tensor_parallel_size:
            problems.append(f"n_gpus_per_node ({self.n_gpus_per_node}) must be divisible by "
                            f"tensor_parallel_size ({self.tensor_parallel_size})")
        if self.advantage_std == "population" and not self.reward_budget \
                and self.baseline != "drgrpo":
            problems.append("verl's grpo estimator normalises by the unbiased std; "
                            "advantage_std='population' is only available on the embedded backend")
        if self.algorithm.overlong_penalty and self.overlong_buffer > self.max_response_length:
            problems.append(f"overlong_buffer ({self.overlong_buffer}) must not exceed "
                            f"max_response_length ({self.max_response_length})")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @cached_property
    def algorithm(self) -> ResolvedAlgorithm:
        """The baseline bundle as verl runs it, this cell's overrides applied (never stored)."""
        return self.resolve_algorithm("verl", kl_loss_type=self.kl_loss_type,
                                      overlong_buffer=self.overlong_buffer,
                                      overlong_penalty=self.overlong_penalty)

    @property
    def gpus(self) -> int:
        """GPUs one launch holds: every node's GPUs."""
        return self.nnodes * self.n_gpus_per_node
