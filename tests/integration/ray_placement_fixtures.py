"""A test backend for Ray placement: the fake trainer (``sweep_fake_trainer.py``) run under
a probe that records when it ran, with the GPUs, nodes and self-placing its settings say.

Register it with ``BACKENDS["spread"] = "ray_placement_fixtures:SpreadBackend"``
(``sweep_cli.py`` does that in ``kappa`` subprocesses).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel, Field
from sweep_fixtures import TRAINER, FakeSettings

from orchestrator.backends.base import Backend, LaunchSpec

PROBE = Path(__file__).resolve().with_name("ray_placement_probe.py")
INTERVALS = "intervals.jsonl"


class SpreadSettings(FakeSettings):
    """A fake cell and what its job asks its executor for."""

    gpus: int = Field(0, ge=0, description="GPUs in all")
    nodes: int = Field(1, ge=1)
    self_placing: bool = False


class SpreadBackend(Backend):
    """Runs the fake trainer under :data:`PROBE` in the run folder."""

    name = "spread"
    settings_model = SpreadSettings

    def launch(self, settings: BaseModel, run_dir: Path) -> LaunchSpec:
        s = SpreadSettings.model_validate(settings.model_dump())
        return LaunchSpec(argv=(sys.executable, str(PROBE), str(run_dir), sys.executable,
                                str(TRAINER), str(run_dir / "config.yaml"), "--out",
                                str(run_dir)),
                          gpus=s.gpus)

    def gpus(self, settings: BaseModel) -> int:
        return int(getattr(settings, "gpus", 0))

    def nodes(self, settings: BaseModel) -> int:
        return int(getattr(settings, "nodes", 1))

    def self_placing(self, settings: BaseModel) -> bool:
        return bool(getattr(settings, "self_placing", False))


def intervals(run_dir: Path) -> list[tuple[float, float]]:
    """When each launch in ``run_dir`` ran: (start, end) wall-clock seconds."""
    path = run_dir / INTERVALS
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return [(float(r["start"]), float(r["end"])) for r in rows]


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of ``spans`` that overlap at any moment."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = most = 0
    for _, step in events:  # an end sorts before a start at the same instant
        now += step
        most = max(most, now)
    return most
