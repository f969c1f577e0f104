"""The fake trainer process (see sweep_fixtures.py). Standard library + PyYAML only."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import yaml


def _write(path: Path, data: object) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def final_metrics(config: dict[str, object]) -> dict[str, float]:
    """Deterministic final metrics: validation accuracy, and eval mean@4 / pass@4 that
    reward budgeting raises by 0.05 (so the demo's ablation table has a delta to show)."""
    seed = int(config.get("seed", 0))  # type: ignore[call-overload]
    rb = 0.05 if config.get("reward_budget") else 0.0
    baseline = str(config.get("baseline", "grpo"))
    mean = round(0.40 + rb + (len(baseline) % 3) / 100 + seed / 100, 4)
    return {"val-core/toy/acc/mean@1": 0.5 + seed / 100,
            "eval/toy/mean@4": mean, "eval/toy/pass@4": round(mean + 0.2, 4)}


def main() -> int:
    config = yaml.safe_load(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[3])
    steps = int(config.get("steps", 4))
    pause = float(config.get("step_seconds", 0.02))
    ckpt = out / "ckpt.json"
    start = json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0
    with open(out / "launches.log", "a") as fh:
        fh.write(f"{start}\n")
    n_launches = len((out / "launches.log").read_text().split())
    _write(out / "env.json", {k: os.environ.get(k) for k in
                              ("MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "OMP_NUM_THREADS")})
    print(f"fake trainer: launch {n_launches}, resuming from step {start}", flush=True)
    if n_launches <= int(config.get("fail_first", 0)):
        print("fake trainer: failing on purpose", flush=True)
        return 3
    for step in range(start + 1, steps + 1):
        if 0 < int(config.get("hold_at", 0)) <= step:
            while not (out / "go").exists():
                time.sleep(0.02)
        time.sleep(pause)
        if step == int(config.get("fail_at_step", 0)):
            print(f"fake trainer: step {step}\nTraceback (most recent call last):\n"
                  "ValueError: the reward function raised (on purpose)", flush=True)
            return 4
        with open(out / "metrics.jsonl", "a") as fh:
            fh.write(json.dumps({"step": step, "metrics": {"actor/entropy": 1.0 / step}}) + "\n")
        _write(ckpt, {"step": step})
        _write(out / "progress.json", {"step": step, "total_steps": steps})
    _write(out / "summary.json", {"status": "succeeded", "steps": steps,
                                  "final": final_metrics(config)})
    with open(out.parent.parent / "completions.log", "a") as fh:
        fh.write(out.name + "\n")
    print("fake trainer: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
