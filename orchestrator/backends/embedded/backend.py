"""The embedded backend: a cell is ``python -m orchestrator train <run_dir>/config.yaml``."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from orchestrator.backends.base import Backend, Demand, LaunchSpec
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.rl_settings import CANARY_STEPS, canary_intervention_steps
from orchestrator.errors import UserInputError
from orchestrator.runs.folder import CONFIG_FILE


class EmbeddedBackend(Backend):
    """Runs the in-repo CPU trainer; the scheduler writes ``config.yaml`` into the run folder."""

    name: ClassVar[str] = "embedded"
    settings_model: ClassVar[type[BaseModel]] = EmbeddedSettings
    # Exactly the settings EmbeddedSettings' cross-field rules read (see _consistent).
    coupled_settings: ClassVar[frozenset[str] | None] = frozenset({
        "model", "clip_ratio", "clip_ratio_low", "clip_ratio_high", "prompts_per_step",
        "ppo_mini_batches", "reward_correct", "reward_incorrect", "task", "benchmarks",
        "max_response_length",
    })
    # The trainer checks for a stop request after every step (trainer.train).
    stops_itself: ClassVar[bool] = True
    # Bump whenever a change to the trainer, the toy tasks, the warm start or a default
    # inside this backend alters the numbers a run produces.
    numerics_version: ClassVar[str] = "1"

    def numerics(self) -> dict[str, str]:
        """The embedded numerics: this backend's version and the installed torch."""
        from importlib.metadata import version

        return {**super().numerics(), "torch": version("torch")}

    def preflight(self, cells: Mapping[str, BaseModel]) -> None:
        """Refuse cells whose shipped base model is damaged: they would fail at their first
        step (:func:`.shipped.verified`), and nothing is recorded before this."""
        from orchestrator.backends.embedded.shipped import problems

        found = problems({label: s for label, s in cells.items()
                          if isinstance(s, EmbeddedSettings)})
        if found:
            raise UserInputError("damaged shipped base model", found)

    def known_metrics(self) -> frozenset[str]:
        """What the trainer logs (``metrics.LOGGED_METRICS``)."""
        from orchestrator.backends.embedded.metrics import LOGGED_METRICS

        return LOGGED_METRICS

    def launch(self, settings: Mapping[str, Any], run_dir: Path, demand: Demand) -> LaunchSpec:
        """``python -m orchestrator train <run_dir>/config.yaml --out <run_dir>`` (pure)."""
        return LaunchSpec(argv=(sys.executable, "-m", "orchestrator", "train",
                                str(run_dir / CONFIG_FILE), "--out", str(run_dir)),
                          env=dict(demand.env), gpus=demand.gpus)

    def gpus(self, settings: BaseModel) -> int:
        """One GPU when the cell asks for CUDA explicitly; ``auto`` and ``cpu`` need none."""
        return 1 if isinstance(settings, EmbeddedSettings) and settings.device == "cuda" else 0

    def canary_settings(self, settings: Mapping[str, Any], model: BaseModel) -> dict[str, Any]:
        """Two RL steps of one prompt per mini-batch, validated and checkpointed at the end,
        and a one-sample final evaluation. What decides the warm start's weights is kept, so
        a canary builds the cache entry its full runs then load."""
        if not isinstance(s := model, EmbeddedSettings):
            raise TypeError(f"expected EmbeddedSettings, got {type(s).__name__}")
        steps = min(CANARY_STEPS, s.max_steps)
        smaller = {
            "max_steps": steps,
            "prompts_per_step": s.ppo_mini_batches,  # the smallest that divides evenly
            "eval_samples": 1,
            "intervention_steps": canary_intervention_steps(
                s.intervention_steps, s.max_steps, steps),
        }
        return {**settings, **{k: v for k, v in smaller.items() if getattr(s, k) != v}}
