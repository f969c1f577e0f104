"""Job folders: ``<log dir>/.jobs/<log name>.<token>/``, one per submit of a job writing to
``<log dir>/<log name>``, holding the executor's record (``pid.json`` or ``job.json``) and
``exit``, the exit code the job wrapper writes. The token starts with the submit time (hex ns),
so crash recovery can ask for the current attempt's jobs only (an earlier attempt's finished job
writes to the same log). Standard library only: the job wrapper runs with ``python -I -S``."""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.runs.atomic import write_atomic
from orchestrator.runs.folder import JOBS_DIR

PID_RECORD = "pid.json"  # the local executor's: {"pid", "start_ticks", "gpus", "argv", "log"}
SLURM_RECORD = "job.json"  # the SLURM executor's: {"slurm_id", "log", "argv"}
EXIT = "exit"
_RANDOM_HEX = 6  # the token's random tail: two submits in one nanosecond differ


def new_job_dir(log_path: Path) -> Path:
    """A fresh job folder for a submit writing to ``log_path`` (created here)."""
    token = f"{time.time_ns():x}{secrets.token_hex(_RANDOM_HEX // 2)}"
    job_dir = log_path.parent / JOBS_DIR / f"{log_path.name}.{token}"
    job_dir.mkdir(parents=True)
    return job_dir


def submitted_at_ns(job_dir: Path, log_name: str) -> int | None:
    """When the job of ``job_dir`` was submitted (ns since the epoch, the submitter's
    clock), or ``None`` for a folder this module did not name."""
    token = job_dir.name.removeprefix(f"{log_name}.")
    try:
        return int(token[:-_RANDOM_HEX], 16) if len(token) > _RANDOM_HEX else None
    except ValueError:
        return None


def job_dirs(log_path: Path, since: datetime | None = None) -> list[Path]:
    """The job folders of submits writing to ``log_path``, newest first; with ``since`` (UTC if
    naive, from the submitter's own clock, as the scheduler stamps it), those at or after it."""
    log_path = Path(log_path).resolve()
    jobs_dir = log_path.parent / JOBS_DIR
    if not jobs_dir.is_dir():
        return []
    found = [d for d in jobs_dir.iterdir() if d.name.startswith(f"{log_path.name}.") and d.is_dir()]
    if since is not None:
        # Counted in whole microseconds (what the registry stores): no rounding error.
        elapsed = since.replace(tzinfo=since.tzinfo or UTC) - datetime(1970, 1, 1, tzinfo=UTC)
        floor = elapsed // timedelta(microseconds=1) * 1000
        found = [d for d in found
                 if (at := submitted_at_ns(d, log_path.name)) is not None and at >= floor]
    return sorted(found, key=lambda d: d.name, reverse=True)


def read_exit(job_dir: Path, name: str = EXIT) -> int | None:
    """The job's exit code (negative: killed by that signal), ``None`` until it has one
    (``name``: another file holding one number, e.g. SLURM's ``slurm_id``)."""
    try:
        return int((job_dir / name).read_text().strip())
    except (OSError, ValueError):
        return None


def write_exit(job_dir: Path, code: int) -> None:
    """Record how the job ended (atomically)."""
    write_atomic(job_dir / EXIT, str(code))
