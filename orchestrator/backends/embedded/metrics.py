"""The run folder's files (``metrics.jsonl``, ``progress.json``, ``summary.json``) and MLflow.

Metrics go to ``metrics.jsonl`` always, and to the MLflow run named by ``MLFLOW_RUN_ID``
(on ``MLFLOW_TRACKING_URI``) when both are set: one ``log_batch`` call per step. The
trainer never creates or ends MLflow runs; the orchestrator owns them.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write JSON to a temporary file then rename it over ``path`` (readers never see half)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))  # insertion order: evaluators list benchmarks in order
    os.replace(tmp, path)


def truncate_metrics(path: Path, last_step: int) -> Counter[tuple[int, str]]:
    """Drop lines of ``metrics.jsonl`` that a resume from ``last_step`` will redo; how
    often each (step, metric) was dropped (what the killed run had already logged).

    That is every line after ``last_step`` and a final evaluation logged at ``last_step``
    (its ``eval/*`` line), which is redone once training ends.
    """
    dropped: Counter[tuple[int, str]] = Counter()
    if not path.exists():
        return dropped
    kept = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            step = int(row["step"])
            final_eval = step == last_step and any(k.startswith("eval/") for k in row["metrics"])
            if step <= last_step and not final_eval:
                kept.append(line)
            else:
                dropped.update((step, key) for key in row["metrics"])
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a kill
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{line}\n" for line in kept))
    os.replace(tmp, path)
    return dropped


class _MlflowSink:
    """Batched logging into an existing MLflow run."""

    def __init__(self, run_id: str) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient()
        self.run_id = run_id

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        batch = [Metric(_mlflow_key(k), v, stamp, step) for k, v in metrics.items()]
        if batch:
            self.client.log_batch(self.run_id, metrics=batch)


def _mlflow_key(name: str) -> str:
    # MLflow rejects '@' in metric names; verl's MLflow logger makes the same substitution.
    return name.replace("@", "_at_")


class RunFiles:
    """Writes one run folder's metrics, progress and summary (the backend file contract)."""

    def __init__(self, out_dir: Path, total_steps: int) -> None:
        self.out_dir = out_dir
        self.total_steps = total_steps
        self.metrics_path = out_dir / "metrics.jsonl"
        run_id = os.environ.get("MLFLOW_RUN_ID")
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        self._mlflow = _MlflowSink(run_id) if run_id and uri else None
        self._in_mlflow: Counter[tuple[int, str]] = Counter()

    def resume_from(self, last_step: int) -> None:
        """Forget the lines a resume from ``last_step`` redoes (``-1``: a fresh start).

        The killed run already sent those lines to MLflow, whose history cannot be edited;
        sending them again would draw every redone step twice. A resume on CPU redoes them
        bit for bit, so MLflow keeps the first copy and ``metrics.jsonl`` the new one.
        """
        self._in_mlflow = truncate_metrics(self.metrics_path, last_step)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Append one step's metrics (finite values only) and forward them to MLflow."""
        clean = {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}
        with self.metrics_path.open("a") as fh:
            fh.write(json.dumps({"step": step, "metrics": clean}) + "\n")
        if self._mlflow is not None:
            fresh = {}
            for key, value in clean.items():
                if self._in_mlflow[step, key] > 0:
                    self._in_mlflow[step, key] -= 1
                else:
                    fresh[key] = value
            self._mlflow.log(step, fresh)

    def progress(self, step: int) -> None:
        """Record how far training got."""
        write_json_atomic(self.out_dir / "progress.json",
                          {"step": step, "total_steps": self.total_steps})

    def summary(self, steps: int, final: Mapping[str, float]) -> None:
        """Record success and the final metrics."""
        write_json_atomic(self.out_dir / "summary.json",
                          {"status": "succeeded", "steps": steps,
                           "final": {k: float(v) for k, v in final.items()}})
