"""The verl backend: a cell is ``run_phases`` driving ``python3 -m verl.trainer.main_ppo``."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from orchestrator.backends.base import Backend, Demand, LaunchSpec
from orchestrator.backends.rl_settings import CANARY_STEPS, canary_intervention_steps
from orchestrator.backends.verl.command import checkpointed_step, launch_env
from orchestrator.backends.verl.settings import VerlSettings
from orchestrator.runs.metrics import MetricsRead
from orchestrator.runs.stop_request import StopRequest, synthesize_summary

# verl's ResourcePoolManager default max_colocate_count (verl/single_controller/ray/base.py):
# each GPU's placement-group bundle asks for this many CPUs beside the GPU.
VERL_CPUS_PER_GPU = 3
# Appended to a canary's extra_overrides (they come last, and the last value wins).
NO_VALIDATION = ("trainer.test_freq=-1", "trainer.val_before_train=False")


def _as_verl(settings: BaseModel) -> VerlSettings:
    if not isinstance(settings, VerlSettings):
        raise TypeError(f"the verl backend needs VerlSettings, got {type(settings).__name__}")
    return settings


def smallest_batch(s: VerlSettings) -> tuple[int, int]:
    """``(prompts_per_step, ppo_mini_batch_size)`` of the smallest batch like ``s``'s, with
    as many mini-batches per step: the smallest divisor of the mini-batch whose responses
    split evenly over the GPUs and, if the cell's give each GPU whole micro-batches, whose
    do too (verl asserts both at start-up)."""
    mini = s.ppo_mini_batch_size or s.prompts_per_step

    def whole_micro_batches(m: int) -> bool:
        return (m * s.group_size // s.gpus) % s.ppo_micro_batch_size_per_gpu == 0

    keeps_micro = whole_micro_batches(mini)
    smallest = next(d for d in range(1, mini + 1)
                    if mini % d == 0 and (d * s.group_size) % s.gpus == 0
                    and (whole_micro_batches(d) or not keeps_micro))
    return smallest * (s.prompts_per_step // mini), smallest


# Settings no cross-field rule nor the shape of verl's config depends on (each reaches verl as
# one checked scalar): planning composes each value once, so a 5-seed grid costs one cold
# preflight per other combination. The rest (kl_coef turns the KL loss on, max_steps places
# the phases, batch sizes meet in divisibility rules, ...) stays coupled.
FREE_SETTINGS = frozenset({
    "seed", "learning_rate", "weight_decay", "temperature", "val_temperature",
    "eval_temperature", "gpu_memory_utilization", "project_name", "experiment_name",
})


class VerlBackend(Backend):
    """Validates and preflights verl cells; launches them through the phase driver."""

    name: ClassVar[str] = "verl"
    settings_model: ClassVar[type[BaseModel]] = VerlSettings
    coupled_settings: ClassVar[frozenset[str] | None] = (
        frozenset(VerlSettings.model_fields) - FREE_SETTINGS)

    def preflight(self, cells: Mapping[str, BaseModel]) -> None:
        """Compose the cells against verl's config at once (:mod:`.preflight`)."""
        from orchestrator.backends.verl.preflight import preflight

        preflight({label: _as_verl(s) for label, s in cells.items()})

    def launch(self, settings: Mapping[str, Any], run_dir: Path, demand: Demand) -> LaunchSpec:
        """The phase driver for this cell; relaunching resumes from verl's checkpoint."""
        argv = (sys.executable, "-m", "orchestrator.backends.verl.run_phases",
                str(run_dir.resolve()), "--settings-json", json.dumps(dict(settings)))
        env = dict(demand.env) | {"HYDRA_FULL_ERROR": "1"}
        return LaunchSpec(argv=argv, env=env, gpus=demand.gpus)

    def launch_env(self, settings: BaseModel) -> dict[str, str]:
        """The plug-in's variables of the cell's first phase (a Ray job's runtime_env)."""
        return launch_env(_as_verl(settings))

    def gpus(self, settings: BaseModel) -> int:
        """Every GPU of every node the run spans."""
        return _as_verl(settings).gpus

    def nodes(self, settings: BaseModel) -> int:
        """verl's ``trainer.nnodes``."""
        return _as_verl(settings).nnodes

    def self_placing(self, settings: BaseModel) -> bool:
        """Always: the launch is verl's driver; its placement groups take the GPUs."""
        return True

    def min_cpus(self, settings: BaseModel) -> int:
        """3 CPUs per GPU (verl's ``max_colocate_count``) and one for its TaskRunner: with
        fewer, the placement groups wait forever and the job idles into its time limit."""
        return VERL_CPUS_PER_GPU * _as_verl(settings).n_gpus_per_node + 1

    def canary_settings(self, settings: Mapping[str, Any], model: BaseModel) -> dict[str, Any]:
        """Two training steps at :func:`smallest_batch`, checkpointed, no validation nor
        final evaluation (what it catches: docs/verl.md#canaries)."""
        s = _as_verl(model)
        steps = min(CANARY_STEPS, s.max_steps)
        prompts, mini = smallest_batch(s)
        smaller: dict[str, Any] = {
            "max_steps": steps,
            "checkpoint_every": steps,
            "intervention_steps": canary_intervention_steps(
                s.intervention_steps, s.max_steps, steps),
            "prompts_per_step": prompts,
            "ppo_mini_batch_size": mini if s.ppo_mini_batch_size is not None else None,
            "eval_files": [],
        }
        # Lists, not tuples: the result is written as YAML and JSON.
        changed = {k: v for k, v in smaller.items()
                   if getattr(s, k) != (tuple(v) if isinstance(v, list) else v)}
        extra = tuple(o for o in s.extra_overrides if o not in NO_VALIDATION)
        return {**settings, **changed, "extra_overrides": [*extra, *NO_VALIDATION]}

    def read_metrics(self, run_dir: Path, cursor: Any = None) -> MetricsRead:
        """verl's own file logs, which keep the NaN ``metrics.jsonl`` leaves out."""
        from orchestrator.backends.verl.logs import new_rows

        rows, offsets = new_rows(run_dir, dict(cursor) if isinstance(cursor, dict) else {})
        return MetricsRead(tuple(rows), offsets)

    def stopped_summary(self, run_dir: Path, request: StopRequest) -> dict[str, Any]:
        """The summary of a job the scheduler ended (verl cannot be asked to stop), from its
        logs: every metric's last value, the last validation as ``eval/*``, at the last step."""
        from orchestrator.backends.verl.logs import final_metrics, merged_metrics

        merged = merged_metrics(run_dir)
        return synthesize_summary(run_dir, request, max(merged, default=0),
                                  final_metrics(merged))

    def read_progress(self, run_dir: Path) -> tuple[int, int] | None:
        """The driver's progress.json, else verl's checkpoint tracker (steps saved)."""
        if (progress := super().read_progress(run_dir)) is not None:
            return progress
        step = checkpointed_step(run_dir)
        return (step, 0) if step else None
