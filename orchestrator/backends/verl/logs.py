"""verl's file logger → kappa's run-folder files and MLflow outbox. verl writes
``{"step": n, "data": {...}}`` lines and truncates its file when it starts, so each launch
gets its own file under ``verl_logs/``, merged here (a later launch wins a repeated step).

Each point reaches MLflow once (docs/verl.md#launch-and-phases): it is queued once per
(phase, step, metric), the phase included because the final evaluation logs at the last
training step too; the outbox record's ``origin`` names the phase, so a relaunched driver
queues only what no earlier one did."""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from orchestrator import configuration
from orchestrator.backends.embedded.metrics import mlflow_sender, mlflow_target
from orchestrator.runs.folder import METRICS_FILE, OUTBOX_FILE, write_progress, write_summary
from orchestrator.runs.metrics import rewrite_metrics
from orchestrator.tracking.naming import metric_key
from orchestrator.tracking.outbox import Outbox

LOG = logging.getLogger(__name__)
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
    """Complete lines of one verl log from byte ``start``, and the new offset."""
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


def _read_logs(run_dir: Path, offsets: dict[str, int],
               finite: bool = True) -> Iterator[tuple[Path, Rows]]:
    # offsets: file name -> byte, advanced here
    for path in log_files(run_dir):
        rows, offsets[path.name] = read_lines(path, offsets.get(path.name, 0), finite)
        yield path, rows


def new_rows(run_dir: Path, offsets: dict[str, int]) -> tuple[Rows, dict[str, int]]:
    """Every launch's lines after ``offsets``, non-finite values kept, and the new offsets."""
    after = dict(offsets)
    return [row for _, rows in _read_logs(run_dir, after, finite=False) for row in rows], after


def merged_metrics(run_dir: Path) -> dict[int, dict[str, float]]:
    """Every launch's steps, merged by step."""
    merged: dict[int, dict[str, float]] = {}
    for _, rows in _read_logs(run_dir, {}):
        for step, metrics in rows:
            merged.setdefault(step, {}).update(metrics)
    return dict(sorted(merged.items()))


def write_run_files(run_dir: Path, total_steps: int, floor_step: int = 0) -> None:
    """Rewrite metrics.jsonl and progress.json (at least at ``floor_step``) from the verl logs."""
    merged = merged_metrics(run_dir)
    rewrite_metrics(run_dir / METRICS_FILE, merged)
    write_progress(run_dir, max([floor_step, *merged]), total_steps)


def final_metrics(merged: dict[int, dict[str, float]]) -> dict[str, float]:
    """Last value of every metric, with the last validation as ``eval/<bench>/mean@k``."""
    final = {k: v for metrics in merged.values() for k, v in metrics.items()}
    for key, value in list(final.items()):
        if match := _VAL_CORE.match(key):
            final[f"eval/{match['bench']}/{match['stat']}"] = value
    return final


def write_final_summary(run_dir: Path, steps: int) -> None:
    """The success summary of the base contract."""
    write_summary(run_dir, {"status": "succeeded", "steps": steps,
                            "final": final_metrics(merged_metrics(run_dir))})


def verl_metric_key(name: str) -> str:
    """A verl metric name as MLflow stores it (:func:`~orchestrator.tracking.naming.metric_key`)
    with no empty, ``.`` or ``..`` path part: MLflow refuses those, holding up the outbox."""
    parts = [p if p not in (".", "..") else p.replace(".", "_")
             for p in metric_key(name).split("/") if p]
    return "/".join(parts) or "_"


Point = tuple[str, int, str]  # a point's identity: (phase, step, MLflow key)


def phase_of(log: Path) -> str:
    """The phase a launch's file log belongs to (its name is ``<index>-<phase>-<attempt>``)."""
    return log.name.split("-", 1)[0]


def queued_points(run_dir: Path) -> set[Point]:
    """The points the run folder's outbox holds (complete lines only)."""
    try:
        text = (run_dir / OUTBOX_FILE).read_text()
    except FileNotFoundError:
        return set()
    points: set[Point] = set()
    for line in text.split("\n")[:-1]:  # a last line without its newline was cut by a kill
        try:
            row = json.loads(line)
            origin, step = str(row.get("origin", "")), int(row["step"])
            points.update((origin, step, str(key)) for key in row["metrics"])
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return points


class MetricsFeed:
    """Queues a run folder's verl file-log lines into its outbox, for MLflow run ``run_id``."""

    def __init__(self, run_dir: Path, run_id: str, uri: str | None,
                 client: Any | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.outbox = Outbox(self.run_dir)
        self._queued = queued_points(self.run_dir)
        self._offsets: dict[str, int] = {}
        self._sender = mlflow_sender(self.outbox, run_id, uri, client)

    def pump(self) -> int:
        """Queue every complete line logged since the last pump; how many records."""
        count = 0
        for path, rows in _read_logs(self.run_dir, self._offsets):
            for step, metrics in rows:
                count += self._queue(phase_of(path), step, metrics)
        if count:
            self._sender.wake()
        return count

    def _queue(self, phase: str, step: int, metrics: Mapping[str, float]) -> int:
        new = {key: value for name, value in metrics.items()
               if (phase, step, key := verl_metric_key(name)) not in self._queued}
        if not new:
            return 0
        self.outbox.put(self.outbox.length(), step, new, origin=phase)
        self._queued.update((phase, step, key) for key in new)
        return 1

    def close(self, timeout: float | None = None) -> bool:
        """Queue what is left, give MLflow up to ``timeout`` s (default
        ``KAPPA_METRICS_FLUSH_SECONDS``); whether everything was sent."""
        self.pump()
        drained = self._sender.close(configuration.read("KAPPA_METRICS_FLUSH_SECONDS")
                                     if timeout is None else timeout)
        if not drained:
            LOG.warning("MLflow has not taken all of this cell's metrics yet; they wait in "
                        "%s and are sent when the cell's run is ended", self.outbox.path)
        return drained


def feed_from_env(run_dir: Path, environ: Mapping[str, str] | None = None) -> MetricsFeed | None:
    """A feed into ``MLFLOW_RUN_ID`` on ``MLFLOW_TRACKING_URI`` when both are set, else ``None``."""
    target = mlflow_target(environ)
    return None if target is None else MetricsFeed(run_dir, *target)
