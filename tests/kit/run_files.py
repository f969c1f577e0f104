"""Reading a running sweep's files from a test, while its processes may be killed at any
moment: a file missing or cut short reads as "nothing yet", never as an error."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path


def progress_step(run_dir: Path | None, none: int = -1) -> int:
    """The step ``run_dir``'s ``progress.json`` reports (``none``: no readable report)."""
    if run_dir is None:
        return none
    try:
        return int(json.loads((run_dir / "progress.json").read_text())["step"])
    except (OSError, ValueError, KeyError):
        return none


def job_groups(sweep_dir: Path) -> list[int]:
    """Process groups of the jobs under ``runs/<sweep>/`` (each led by its wrapper, whose
    pid its ``pid.json`` records)."""
    pids = []
    for record in sweep_dir.glob("*/.jobs/*/pid.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            pids.append(int(json.loads(record.read_text())["pid"]))
    return pids
