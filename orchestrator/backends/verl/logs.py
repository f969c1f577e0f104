"""verl's file logger → kappa's run-folder files (metrics.jsonl, progress.json, summary.json).
verl writes ``{"step": n, "data": {...}}`` lines and truncates its file when it starts, so
the phase driver gives every launch its own file under ``verl_logs/``, merged here (a later
launch wins for a step it repeated after a resume).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from orchestrator.runs.folder import METRICS_FILE, write_progress, write_summary
from orchestrator.runs.metrics import rewrite_metrics

LOG_DIR = "verl_logs"
Rows = list[tuple[int, dict[str, float]]]  # (step, metrics) per log line
_VAL_CORE = re.compile(r"^val-core/(?P<bench>.+)/acc/(?P<stat>mean@\d+)$")


def log_files(run_dir: Path) -> list[Path]:
    """Every launch's verl log, oldest first (names sort by phase, then attempt)."""
    return sorted((run_dir / LOG_DIR).glob("*.jsonl"))


def _numeric(data: dict[str, Any], finite: bool = True) -> dict[str, float]:
    return {key: float(value) for key, value in data.items()
            if isinstance(value, bool | int | float) and (not finite or math.isfinite(value))}


def read_lines(path: Path, start: int = 0, finite: bool = True) -> tuple[Rows, int]:
    """Complete lines of one verl log from byte ``start``: ``([(step, metrics)], new offset)``
    (``finite=False``: NaN and infinities too, which verl's file logger writes as such)."""
    try:
        raw = path.read_bytes()[start:]
    except OSError:
        return [], start
    end = raw.rfind(b"\n") + 1  # a line still being written is read next time
    rows: Rows = []
    for line in raw[:end].splitlines():
        try:
            obj = json.loads(line)
            rows.append((int(obj["step"]), _numeric(obj.get("data", {}), finite)))
        except (ValueError, KeyError, TypeError):
            continue
    return rows, start + end


def new_rows(run_dir: Path, offsets: dict[str, int]) -> tuple[Rows, dict[str, int]]:
    """Every launch's lines logged after ``offsets`` (file name -> byte), launch by launch,
    non-finite values kept; and the new offsets (the stopping rules' input)."""
    rows: Rows = []
    after = dict(offsets)
    for path in log_files(run_dir):
        got, after[path.name] = read_lines(path, offsets.get(path.name, 0), finite=False)
        rows += got
    return rows, after


def merged_metrics(run_dir: Path) -> dict[int, dict[str, float]]:
    """All steps logged by every launch in ``run_dir``, merged by step."""
    merged: dict[int, dict[str, float]] = {}
    for path in log_files(run_dir):
        for step, metrics in read_lines(path)[0]:
            merged.setdefault(step, {}).update(metrics)
    return dict(sorted(merged.items()))


def write_run_files(run_dir: Path, total_steps: int, floor_step: int = 0) -> int:
    """Rewrite metrics.jsonl and progress.json from the verl logs; the latest step."""
    merged = merged_metrics(run_dir)
    rewrite_metrics(run_dir / METRICS_FILE, merged)
    step = max([floor_step, *merged])
    write_progress(run_dir, step, total_steps)
    return step


def final_metrics(merged: dict[int, dict[str, float]]) -> dict[str, float]:
    """Last value of every metric, with the last validation as ``eval/<bench>/mean@k``."""
    final = {k: v for metrics in merged.values() for k, v in metrics.items()}
    for key, value in list(final.items()):
        if match := _VAL_CORE.match(key):
            final[f"eval/{match['bench']}/{match['stat']}"] = value
    return final


def write_final_summary(run_dir: Path, steps: int) -> None:
    """The success summary of the base contract."""
    final = final_metrics(merged_metrics(run_dir))
    write_summary(run_dir, {"status": "succeeded", "steps": steps, "final": final})
