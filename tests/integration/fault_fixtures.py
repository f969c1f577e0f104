"""The ``faulty`` test backend: launches ``sweep_fault_trainer.py`` (a real process that
logs through the real outbox; see there). ``sweep_cli.py`` registers it."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.backends.base import Backend, LaunchSpec

TRAINER = Path(__file__).resolve().with_name("sweep_fault_trainer.py")


class FaultSettings(BaseModel):
    """What a fault-suite cell does."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: int = Field(8, ge=1)
    checkpoint_every: int = Field(3, ge=1)
    step_seconds: float = Field(0.05, ge=0)
    seed: int = 0


class FaultBackend(Backend):
    """Launches ``sweep_fault_trainer.py`` in the run folder."""

    name = "faulty"
    settings_model = FaultSettings

    def launch(self, settings: BaseModel, run_dir: Path) -> LaunchSpec:
        return LaunchSpec(argv=(sys.executable, str(TRAINER), str(run_dir / "config.yaml"),
                                "--out", str(run_dir)))
