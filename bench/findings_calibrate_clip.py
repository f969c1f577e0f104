"""The clip-pressure calibration of docs/findings.md's fifth round: for each candidate
update pressure, one `toy-spurious` cell (ε = 0.2, G = 8, seed 49) for 10 RL steps, and its
mean ``actor/pg_clipfrac`` — the only number read. The first candidate at or above 0.01 is
the study's; none: the last.

    .venv/bin/python bench/findings_calibrate_clip.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = ({"learning_rate": 1e-4, "ppo_epochs": 1}, {"learning_rate": 1e-4, "ppo_epochs": 4},
              {"learning_rate": 3e-4, "ppo_epochs": 4})
TARGET = 0.01
CELL = {"clip_ratio": 0.2, "group_size": 8, "seed": 49, "max_steps": 10, "val_every": 10,
        "checkpoint_every": 10}


def clip_fraction(pressure: dict[str, float], folder: Path) -> float:
    """Mean ``actor/pg_clipfrac`` of the calibration cell under ``pressure``."""
    from orchestrator.backends.embedded.settings import EmbeddedSettings
    from orchestrator.backends.embedded.trainer import train
    from orchestrator.grid.plan import load_plan

    base = load_plan(ROOT / "experiments/toy/spurious_rewards.yaml").cells[0].settings
    settings = EmbeddedSettings.model_validate({**base, **CELL, **pressure, "device": "cpu"})
    train(settings, folder, progress=False)
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    values = [r["metrics"]["actor/pg_clipfrac"] for r in rows
              if "actor/pg_clipfrac" in r["metrics"]]
    return sum(values) / len(values)


def main() -> int:
    chosen = None
    with tempfile.TemporaryDirectory() as tmp:
        for n, pressure in enumerate(CANDIDATES):
            fraction = clip_fraction(pressure, Path(tmp) / str(n))
            print(f"{pressure}: mean pg_clipfrac {fraction:.4f}", flush=True)
            if fraction >= TARGET:
                chosen = pressure
                break
    print(f"chosen: {chosen or CANDIDATES[-1]}"
          + ("" if chosen else f" (none reached {TARGET}: the last)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
