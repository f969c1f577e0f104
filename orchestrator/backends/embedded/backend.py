"""The embedded backend: a cell is ``python -m orchestrator train <run_dir>/config.yaml``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel

from orchestrator.backends.base import Backend, LaunchSpec
from orchestrator.backends.embedded.settings import EmbeddedSettings


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

    def launch(self, settings: BaseModel, run_dir: Path) -> LaunchSpec:
        """``python -m orchestrator train <run_dir>/config.yaml --out <run_dir>`` (pure)."""
        return LaunchSpec(
            argv=(sys.executable, "-m", "orchestrator", "train",
                  str(run_dir / "config.yaml"), "--out", str(run_dir)),
            env={},
            gpus=self.gpus(settings),
        )

    def gpus(self, settings: BaseModel) -> int:
        """One GPU when the cell asks for CUDA explicitly; ``auto`` and ``cpu`` need none."""
        return 1 if isinstance(settings, EmbeddedSettings) and settings.device == "cuda" else 0
