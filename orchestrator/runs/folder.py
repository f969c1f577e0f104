"""The files of a cell's run folder: their names, and reading and writing them.

The backend file contract (what a launched process leaves, :mod:`orchestrator.backends.base`)::

    config.yaml     the cell's resolved settings (written before each launch)
    metrics.jsonl   one line per logged step (:mod:`.metrics`)
    progress.json   {"step": int, "total_steps": int}, rewritten as training advances
    summary.json    {"status": str, "steps": int, "final": {name: float},
                     "stopped": {...}?, "provenance": {...}?}, written when the run ends
    provenance.json what made the attempt's numbers (:mod:`.provenance`), written as it starts

and beside it the orchestrator's ``stop-request.json`` (:mod:`.stop_request`), ``cell.json``
(:func:`write_cell_file`), ``.mlflow-run-pending`` (a launch created the cell's MLflow run and
has not recorded it yet), the MLflow outbox (:mod:`orchestrator.tracking.outbox`), ``train.log``
and ``.jobs/`` (:mod:`.jobs`). JSON is written atomically; absent or unreadable is ``None``."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from orchestrator.runs.atomic import write_atomic

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
PROGRESS_FILE = "progress.json"
SUMMARY_FILE = "summary.json"
PROVENANCE_FILE = "provenance.json"
STOP_REQUEST_FILE = "stop-request.json"
CELL_FILE = "cell.json"
RUN_PENDING_MARKER = ".mlflow-run-pending"
OUTBOX_FILE = "mlflow-outbox.jsonl"
OUTBOX_SENT_FILE = "mlflow-sent.json"
OUTBOX_LOCK_FILE = "mlflow-outbox.lock"
LOG_FILE = "train.log"
JOBS_DIR = ".jobs"


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; ``None`` if absent, unreadable or not an object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: Any, durable: bool = True, **dumps: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (``dumps``: :func:`json.dumps`'s
    options; ``durable``: :func:`~orchestrator.runs.atomic.replacing`'s)."""
    write_atomic(path, json.dumps(data, **dumps), durable=durable)


def write_config(run_dir: Path, settings: Mapping[str, Any]) -> None:
    """Create ``run_dir`` with the cell's resolved settings as ``config.yaml`` (left as it
    is when it already holds them: submit writes it, each launch makes sure of it)."""
    import yaml

    text = yaml.safe_dump(dict(settings), sort_keys=False)
    config = run_dir / CONFIG_FILE
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if config.read_text() == text:
            return
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(config, text)


def start_over(run_dir: Path, settings: Mapping[str, Any]) -> None:
    """Move ``run_dir`` aside (to ``<name>.prev-<n>``, the first free ``n``) and make it
    anew with the same ``config.yaml`` (``settings`` where it had none)."""
    config = run_dir / CONFIG_FILE
    text = config.read_text() if config.exists() else None
    if run_dir.exists():
        n = 1
        while (target := run_dir.with_name(f"{run_dir.name}.prev-{n}")).exists():
            n += 1
        run_dir.rename(target)
    if text is None:
        write_config(run_dir, settings)
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(config, text)


def read_progress(run_dir: Path) -> tuple[int, int] | None:
    """``(step, total_steps)`` of a running or finished launch, if it reported any."""
    data = read_json(run_dir / PROGRESS_FILE)
    try:
        return None if data is None else (int(data.get("step", 0)),
                                          int(data.get("total_steps", 0)))
    except (TypeError, ValueError):
        return None


def write_progress(run_dir: Path, step: int, total_steps: int) -> None:
    """Record how far training got (a progress mirror: not flushed to disk each step)."""
    write_json(run_dir / PROGRESS_FILE, {"step": step, "total_steps": total_steps},
               durable=False)


def read_summary(run_dir: Path | None) -> dict[str, Any] | None:
    """The run's ``summary.json``, or ``None`` (no folder, not ended, unreadable)."""
    return None if run_dir is None else read_json(run_dir / SUMMARY_FILE)


def write_summary(run_dir: Path, summary: Mapping[str, Any]) -> None:
    """Record how the run ended (see the module docstring for the shape), with what made
    its numbers when the attempt recorded that."""
    made = read_json(run_dir / PROVENANCE_FILE)
    write_json(run_dir / SUMMARY_FILE, dict(summary) | ({"provenance": made} if made else {}))


class CellFacts(Protocol):
    """What a cell's files need of it (a registry record or a grid cell fits)."""

    @property
    def cell_id(self) -> str: ...
    @property
    def axes(self) -> Mapping[str, Any]: ...
    @property
    def labels(self) -> Any: ...


def write_cell_file(run_dir: Path, sweep: str, cell: CellFacts, state: str,
                    mlflow_run_id: str | None) -> Path:
    """Write ``run_dir/cell.json`` (made if needed), rewritten after each state change (the
    registry stays the truth), so a folder copied elsewhere still says which sweep and cell it
    is, how it ended and which MLflow run holds its curves (:mod:`orchestrator.analysis.sources`):
    ``{"sweep", "cell_id", "axes", "labels", "state", "mlflow_run_id": str | null}``."""
    labels = cell.labels if isinstance(cell.labels, Mapping) else {}
    document = {"sweep": sweep, "cell_id": cell.cell_id, "axes": dict(cell.axes),
                "labels": dict(labels), "state": str(state),
                "mlflow_run_id": mlflow_run_id or None}
    run_dir.mkdir(parents=True, exist_ok=True)
    # A mirror of the registry, rewritten at each state change: no flush to disk needed.
    write_json(run_dir / CELL_FILE, document, durable=False, indent=1, default=str)
    return run_dir / CELL_FILE


def read_cell_file(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir/cell.json`` as a dict, or ``None`` if absent or unreadable."""
    return read_json(run_dir / CELL_FILE)


def summary_final(summary: Mapping[str, Any] | None) -> dict[str, float]:
    """The numeric entries of a summary's ``final`` (a ``null`` or text value is missing, not
    a reason to fail reading the whole sweep)."""
    final = (summary or {}).get("final")
    if not isinstance(final, Mapping):
        return {}
    return {str(k): float(v) for k, v in final.items()
            if isinstance(v, int | float) and not isinstance(v, bool)}


def summary_stop_reason(summary: Mapping[str, Any] | None) -> str | None:
    """Why a stopping rule ended the run (the summary's ``stopped``), if one did."""
    stopped = (summary or {}).get("stopped")
    reason = stopped.get("reason") if isinstance(stopped, Mapping) else None
    return str(reason) if reason else None
