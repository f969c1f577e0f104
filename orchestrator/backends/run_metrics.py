"""``metrics.jsonl`` lines, written and read incrementally ("metrics since where I was").

A line is ``{"step": int, "metrics": {name: float}}``, and when a step produced values
that are not finite, also ``"nonfinite": {name: "nan" | "inf" | "-inf"}``. JSON has no
NaN, MLflow's store would reject it and every reader of ``metrics`` expects numbers, so
such values stay out of ``metrics``; the separate field keeps them for whoever judges
them (the ``diverged: {nonfinite: true}`` stopping rule). Readers that only know
``metrics`` are unaffected.

:class:`MetricsRead` is what :meth:`orchestrator.backends.Backend.read_metrics` returns:
the rows logged since a cursor (file identity + byte offset), or the whole history again
(``restarted``) when the file was rewritten (a resume drops the steps it will redo).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"

MetricRow = tuple[int, dict[str, float]]
"""One logged step: ``(step, {name: value})``, non-finite values included."""


def split_finite(metrics: Mapping[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    """``(finite values, {name: "nan" | "inf" | "-inf"})`` of one step's metrics."""
    finite: dict[str, float] = {}
    other: dict[str, str] = {}
    for name, value in metrics.items():
        number = float(value)
        if math.isfinite(number):
            finite[name] = number
        else:
            other[name] = "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")
    return finite, other


def metrics_line(step: int, metrics: Mapping[str, float]) -> tuple[str, dict[str, float]]:
    """The ``metrics.jsonl`` line of one step (newline included) and its finite values."""
    finite, other = split_finite(metrics)
    row: dict[str, Any] = {"step": step, "metrics": finite}
    if other:
        row["nonfinite"] = other
    return json.dumps(row) + "\n", finite


def parse_row(obj: Any) -> MetricRow | None:
    """A decoded line as ``(step, values)`` with non-finite values as floats, or ``None``."""
    try:
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
    """Where reading stopped: the file (device, inode) and the byte after the last
    complete line."""

    file: tuple[int, int] | None = None
    offset: int = 0


@dataclass(frozen=True)
class MetricsRead:
    """Rows logged since the cursor (in logged order) and the cursor to pass next time.

    ``restarted``: the file was replaced or shortened since the cursor, so ``rows`` is
    the whole history from its first line and what was read before must be forgotten.
    """

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
    rows = []
    for line in raw[:end].splitlines():
        try:
            row = parse_row(json.loads(line))
        except ValueError:
            continue
        if row is not None:
            rows.append(row)
    return MetricsRead(tuple(rows), MetricsCursor(identity, start + end), restarted)
