"""A fake backend for stopping-rule tests: its process logs a scripted metric curve, can
hold at a step until told to go on, and honours stop requests like the embedded trainer
(checkpoint, summary with ``stopped``, exit 0) — or, as ``stopfake-deaf``, ignores them
like a process that cannot be asked (verl), so the scheduler must end it.

Register with ``BACKENDS["stopfake"] = "stopping_fixtures:StopFakeBackend"``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.backends.base import Backend, LaunchSpec

TRAINER = Path(__file__).resolve().parent / "stopping_fake_trainer.py"
BACKEND_ENTRY = "stopping_fixtures:StopFakeBackend"
DEAF_ENTRY = "stopping_fixtures:DeafStopFakeBackend"


class StopFakeSettings(BaseModel):
    """What a scripted cell logs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: int = Field(20, ge=1)
    step_seconds: float = Field(0.01, ge=0)
    values: list[float | str] = Field(
        default_factory=list,
        description="metric 'score' at steps 1, 2, ... (the last repeats; 'nan' for NaN)")
    hold_at: int = Field(0, ge=0, description="from this step on, wait for <run_dir>/go")
    seed: int = 0


class StopFakeBackend(Backend):
    """Launches ``stopping_fake_trainer.py``, which checks for a stop request each step."""

    name = "stopfake"
    settings_model = StopFakeSettings
    stops_itself = True

    def launch(self, settings: BaseModel, run_dir: Path) -> LaunchSpec:
        return LaunchSpec(argv=(sys.executable, str(TRAINER), str(run_dir / "config.yaml"),
                                str(run_dir), "honour" if self.stops_itself else "ignore"))


class DeafStopFakeBackend(StopFakeBackend):
    """The same process, deaf to stop requests: the scheduler ends its job."""

    name = "stopfake-deaf"
    stops_itself = False


def stop_spec(path: Path, name: str, stop: str, *, backend: str = "stopfake",
              retries: int = 0, seeds: int = 1, resources: str = "", **base: object) -> Path:
    """A spec of ``seeds`` scripted cells with the ``stop:`` block ``stop`` (YAML flow)."""
    import json

    base_yaml = "".join(f"  {k}: {json.dumps(v)}\n" for k, v in base.items()) or "  steps: 20\n"
    extra = f"resources: {resources}\n" if resources else ""
    path.write_text(f"name: {name}\nbackend: {backend}\nretries: {retries}\n{extra}"
                    f"base:\n{base_yaml}axes:\n  seed: {list(range(seeds))}\nstop: {stop}\n")
    return path
