"""The one fake trainer: the process :mod:`kit.fake_backend` launches.

``python fake_trainer.py CONFIG RUN_DIR honour|ignore``. It writes its run folder through
:mod:`orchestrator.runs` (metrics, progress, summary; ``ckpt.json`` is its checkpoint),
resumes from its checkpoint, and logs the metrics of its ``curve`` (see
:class:`kit.fake_backend.FakeSettings`, whose fields are the CONFIG's keys). ``honour``:
a stop request ends the run at the next step boundary at or after the step it was
promised at (:class:`~orchestrator.runs.stop_request.StopPoint`; summary with
``stopped``, exit 0);
``ignore``: it runs on until the scheduler ends it. What every curve shares, for tests to
steer and watch: ``launches.log`` (the step each launch started from), ``env.json``,
``fail_first``, ``fail_at_step``, ``hold_at`` (wait for ``RUN_DIR/go``), ``hold_while``,
``checkpoint_every`` and ``<runs root>/completions.log`` (cells that ran to the end). Only
the fault curve sends its metrics to MLflow (through the embedded trainer's outbox).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from orchestrator.runs.folder import METRICS_FILE, write_json, write_progress, write_summary
from orchestrator.runs.metrics import append_metrics
from orchestrator.runs.stop_request import (
    StopPoint,
    StopRequest,
    logged_through,
    read_stop_request,
    stopped_block,
)

# What a config without them runs, by curve: (steps, step_seconds).
DEFAULTS = {"sweep": (4, 0.02), "stop": (20, 0.01), "search": (6, 0.01), "fault": (8, 0.05)}


def step_metrics(seed: int, step: int) -> dict[str, float]:
    """Fault curve: what training step ``step`` logs (step 0: the warm start)."""
    metrics = {"val-core/toy/acc/mean@1": round(0.3 + seed / 100 + step / 1000, 6)}
    if step > 0:
        metrics["actor/pg_loss"] = round(1.0 / step + seed, 6)
        metrics["critic/score/mean"] = round(step * 0.01 + seed, 6)
    return metrics


def final_metrics(seed: int) -> dict[str, float]:
    """Fault curve: the final evaluation."""
    return {"eval/toy/mean@4": 0.5 + seed / 100, "eval/toy/pass@4": 0.7 + seed / 100}


def sweep_final(config: Mapping[str, Any]) -> dict[str, float]:
    """Sweep curve: validation accuracy, and eval mean@4 / pass@4 that reward budgeting
    raises by 0.05 (so the demo's ablation table has a delta to show); for the baseline
    ``noisy``, by a seed-to-seed noise of mean about 0 instead (a comparison that seeds on
    demand cannot decide)."""
    seed = int(config.get("seed", 0))
    rb = 0.05 if config.get("reward_budget") else 0.0
    if config.get("baseline") == "noisy" and rb:
        rb = ((seed * 37) % 11 - 5) / 100
    mean = round(0.40 + rb + (len(str(config.get("baseline", "grpo"))) % 3) / 100
                 + seed / 100, 4)
    return {"val-core/toy/acc/mean@1": 0.5 + seed / 100,
            "eval/toy/mean@4": mean, "eval/toy/pass@4": round(mean + 0.2, 4)}


def search_score(config: Mapping[str, Any], step: int, steps: int) -> float:
    """Search curve: rises to ``1 - (x - 0.3)^2 (+ 0.1 for shape b)`` at the last step
    (with ``fall_after: K``, falls again after step K)."""
    x = float(config.get("x", 0.5))
    top = 1 - (x - 0.3) ** 2 + (0.1 if config.get("shape") == "b" else 0.0)
    fall = config.get("fall_after")
    if isinstance(fall, int) and step > fall:
        return round(top * max(0.0, 2 * fall - step) / steps, 6)
    return round(top * step / steps, 6)


def curve(config: Mapping[str, Any], steps: int
          ) -> tuple[Callable[[int], dict[str, float]], Callable[[int], dict[str, float]]]:
    """The curve's (metrics of a step, final metrics of a run that ended at a step)."""
    name = config.get("curve", "sweep")
    seed = int(config.get("seed", 0))
    if name == "stop":
        values = [float(v) for v in config.get("values") or []] or [0.5]
        return (lambda step: {"steps_done": float(step),
                              "score": values[min(step, len(values)) - 1]},
                lambda last: {"eval/toy/mean@4": 0.25 + last / 1000})
    if name == "search":
        return (lambda step: {"val/score": search_score(config, step, steps)},
                lambda last: {"val/score": search_score(config, last, steps)})
    if name == "fault":
        return (lambda step: step_metrics(seed, step), lambda last: final_metrics(seed))
    return (lambda step: {"actor/entropy": 1.0 / step}, lambda last: sweep_final(config))


def hold(config: Mapping[str, Any], out: Path, step: int, honour: bool) -> None:
    """Wait as the test asked: for ``RUN_DIR/go`` from step ``hold_at`` on, and while the
    path ``hold_while`` exists (or until a stop request, which is honoured)."""
    if 0 < int(config.get("hold_at", 0)) <= step:
        while not (out / "go").exists():
            time.sleep(0.02)
    while config.get("hold_while") and Path(config["hold_while"]).exists():
        if honour and read_stop_request(out) is not None:
            return
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    """Run (or resume) one fake cell; the exit code."""
    config = yaml.safe_load(Path(argv[0]).read_text()) or {}
    out, honour = Path(argv[1]), argv[2] == "honour"
    default_steps, default_pause = DEFAULTS[config.get("curve", "sweep")]
    steps = int(config.get("steps", default_steps))
    every = int(config.get("checkpoint_every", 1))
    ckpt = out / "ckpt.json"
    start = json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0
    with open(out / "launches.log", "a") as fh:
        fh.write(f"{start}\n")
    launch = len((out / "launches.log").read_text().split())
    write_json(out / "env.json", {k: os.environ.get(k) for k in
                                  ("MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "OMP_NUM_THREADS",
                                   "KAPPA_HOME", "KAPPA_CACHE")})
    print(f"fake trainer: launch {launch}, resuming from step {start}", flush=True)
    if launch <= int(config.get("fail_first", 0)):
        print("fake trainer: failing on purpose", flush=True)
        return 3
    metrics_of, final_of = curve(config, steps)
    # As the embedded trainer: a stop lands at the requested step or a later one already
    # logged, read before a resume cuts the metrics back.
    stopping = StopPoint(out, logged_through(out)) if honour else None
    files = None
    if config.get("curve") == "fault":  # the real trainer's files: metrics reach MLflow
        from orchestrator.backends.embedded.metrics import RunFiles

        files = RunFiles(out, steps)
        files.resume_from(start if ckpt.exists() else -1)
        if start == 0:
            files.log(0, step_metrics(int(config.get("seed", 0)), 0))
    log: Callable[[int, Mapping[str, float]], object] = (
        files.log if files is not None else partial(append_metrics, out / METRICS_FILE))
    last = start
    for step in range(start + 1, steps + 1):
        hold(config, out, step, honour)
        if stopping is not None and stopping.due(step - 1):
            break
        time.sleep(float(config.get("step_seconds", default_pause)))
        if step == int(config.get("fail_at_step", 0)):
            print(f"fake trainer: step {step}\nTraceback (most recent call last):\n"
                  "ValueError: the reward function raised (on purpose)", flush=True)
            return 4
        log(step, metrics_of(step))
        write_progress(out, step, steps)
        if step % every == 0 or step == steps:
            write_json(ckpt, {"step": step})
        last = step
    stop = stopping.request if stopping is not None else None
    final = final_of(last)
    if files is not None:
        files.log(last, final)
        files.close()
    write_summary(out, summary(last, final, stop))
    if stop is not None:
        print(f"stopped at step {last}: {stop.reason}", flush=True)
        return 0
    with open(out.parent.parent / "completions.log", "a") as fh:
        fh.write(out.name + "\n")
    print("fake trainer: done", flush=True)
    return 0


def summary(last: int, final: Mapping[str, float], stop: StopRequest | None) -> dict[str, Any]:
    """``summary.json`` of a run that ended at step ``last`` (on ``stop``, if given)."""
    data: dict[str, Any] = {"status": stop.outcome if stop else "succeeded", "steps": last,
                            "final": {k: float(v) for k, v in final.items()}}
    if stop is not None:
        data["stopped"] = stopped_block(stop, last)
    return data


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
