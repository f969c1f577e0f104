"""``metrics.jsonl``, one line a step: ``{"step": int, "metrics": {name: float}}``, plus
``"nonfinite": {name: "nan" | "inf" | "-inf"}`` for values JSON cannot hold (every reader of
``metrics``, MLflow too, expects numbers), kept for ``diverged: {nonfinite: true}``."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.runs.atomic import write_atomic

MetricRow = tuple[int, dict[str, float]]  # (step, {name: value}), non-finite values included


def metrics_line(step: int, metrics: Mapping[str, float]) -> tuple[str, dict[str, float]]:
    """The ``metrics.jsonl`` line of one step (newline included) and its finite values."""
    finite: dict[str, float] = {}
    other: dict[str, str] = {}
    for name, value in metrics.items():
        number = float(value)
        if math.isfinite(number):
            finite[name] = number
        else:
            other[name] = "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")
    row: dict[str, Any] = {"step": step, "metrics": finite}
    if other:
        row["nonfinite"] = other
    return json.dumps(row) + "\n", finite


def append_metrics(path: Path, step: int, metrics: Mapping[str, float]) -> dict[str, float]:
    """Append one step's line to ``path``; its finite values."""
    line, finite = metrics_line(step, metrics)
    with path.open("a") as fh:
        fh.write(line)
    return finite


def rewrite_metrics(path: Path, rows: Mapping[int, Mapping[str, float]]) -> None:
    """Replace ``path`` with one line per step of ``rows`` (atomically)."""
    write_atomic(path, "".join(metrics_line(step, values)[0] for step, values in rows.items()))


def truncate_metrics(path: Path, last_step: int) -> list[str]:
    """Drop the lines a resume from ``last_step`` will redo: every line after it, and a
    final evaluation (``eval/*``) logged at it; the lines kept, in order."""
    if not path.exists():
        return []
    kept = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            step = int(row["step"])
            final_eval = step == last_step and any(k.startswith("eval/") for k in row["metrics"])
            if step <= last_step and not final_eval:
                kept.append(line)
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a kill
    write_atomic(path, "".join(f"{line}\n" for line in kept))
    return kept


def parse_row(line: bytes | str) -> MetricRow | None:
    """A line as ``(step, values)`` with non-finite values as floats, or ``None``."""
    try:
        obj = json.loads(line)
        step = int(obj["step"])
        values = {str(k): float(v) for k, v in obj["metrics"].items()
                  if isinstance(v, int | float) and not isinstance(v, bool)}
        for name, word in (obj.get("nonfinite") or {}).items():
            values[str(name)] = float(word)  # "nan" / "inf" / "-inf"
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return step, values


@dataclass(frozen=True)
class MetricsCursor:
    """Where reading stopped: the file (device, inode) and the byte after the last complete line."""

    file: tuple[int, int] | None = None
    offset: int = 0


@dataclass(frozen=True)
class MetricsRead:
    """``Backend.read_metrics``' answer: rows logged since the cursor, in order, and the cursor
    to pass next. ``restarted``: the file was replaced or shortened (a resume drops the steps it
    redoes), so ``rows`` is the whole history and what was read before must be forgotten."""

    rows: tuple[MetricRow, ...]
    cursor: Any
    restarted: bool = False


def read_metrics_file(path: Path, cursor: MetricsCursor | None = None) -> MetricsRead:
    """The complete lines of ``path`` after ``cursor`` (a line still being written is
    read next time; a line that does not parse is skipped)."""
    cursor = cursor or MetricsCursor()
    try:
        with open(path, "rb") as fh:
            stat = os.fstat(fh.fileno())
            identity = (stat.st_dev, stat.st_ino)
            restarted = cursor.file is not None and (
                identity != cursor.file or stat.st_size < cursor.offset)
            start = 0 if restarted or cursor.file is None else cursor.offset
            fh.seek(start)
            raw = fh.read()
    except OSError:
        return MetricsRead((), cursor)
    end = raw.rfind(b"\n") + 1
    rows = [row for line in raw[:end].splitlines() if (row := parse_row(line)) is not None]
    return MetricsRead(tuple(rows), MetricsCursor(identity, start + end), restarted)


def last_values(path: Path) -> tuple[dict[str, float], int]:
    """The last finite value of every metric in ``path`` (in the order they first
    appear) and the last step logged (``-1``: none)."""
    values: dict[str, float] = {}
    last = -1
    for step, row in read_metrics_file(path).rows:
        values.update({k: v for k, v in row.items() if math.isfinite(v)})
        last = max(last, step)
    return values, last


def metric_curves(path: Path) -> dict[str, dict[int, float]]:
    """``{metric: {step: value}}`` of the finite values in ``path``: a step logged twice
    (a resumed launch re-logs from its checkpoint) keeps its last value."""
    out: dict[str, dict[int, float]] = {}
    for step, row in read_metrics_file(path).rows:
        for name, value in row.items():
            if math.isfinite(value):
                out.setdefault(name, {})[step] = value
    return out
