"""A fast trainer for the fault-injection suite (see fault_fixtures.py).

It logs through the embedded trainer's real :class:`RunFiles` (so its metrics take the
real outbox to MLflow), checkpoints every ``checkpoint_every`` steps, resumes from its
checkpoint like the real trainer, and computes metrics that are a pure function of
(seed, step), so a test knows every point MLflow must hold.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import yaml

from orchestrator.backends.embedded.metrics import RunFiles


def step_metrics(seed: int, step: int) -> dict[str, float]:
    """What training step ``step`` logs (step 0: the warm start)."""
    metrics = {"val-core/toy/acc/mean@1": round(0.3 + seed / 100 + step / 1000, 6)}
    if step > 0:
        metrics["actor/pg_loss"] = round(1.0 / step + seed, 6)
        metrics["critic/score/mean"] = round(step * 0.01 + seed, 6)
    return metrics


def final_metrics(seed: int) -> dict[str, float]:
    """The final evaluation."""
    return {"eval/toy/mean@4": 0.5 + seed / 100, "eval/toy/pass@4": 0.7 + seed / 100}


def main() -> int:
    config = yaml.safe_load(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[3])
    steps = int(config["steps"])
    every = int(config["checkpoint_every"])
    pause = float(config["step_seconds"])
    seed = int(config["seed"])
    ckpt = out / "ckpt.json"
    start = json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0
    with open(out / "launches.log", "a") as fh:
        fh.write(f"{start}\n")
    files = RunFiles(out, steps)
    files.resume_from(start if ckpt.exists() else -1)
    if start == 0:
        files.log(0, step_metrics(seed, 0))
    for step in range(start + 1, steps + 1):
        time.sleep(pause)
        files.log(step, step_metrics(seed, step))
        files.progress(step)
        if step % every == 0 or step == steps:
            tmp = out / ".ckpt.json.tmp"
            tmp.write_text(json.dumps({"step": step}))
            os.replace(tmp, ckpt)
    final = final_metrics(seed)
    files.log(steps, final)
    files.close()
    files.summary(steps, final)
    with open(out.parent.parent / "completions.log", "a") as fh:
        fh.write(out.name + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
