"""Where a sweep's files live: the one path rule, and the name of every file in a sweep's
folder (a cell's run folder names its own files: :mod:`.folder`)::

    <runs root>/<sweep>/                  the sweep's folder (paths.runs_root())
        <cell id>/                        a cell's run folder, unless the registry records
                                          another (``CellRecord.run_dir``, set at submit)
        <cell id>.prev-<n>/               a rerun's earlier folder (folder.start_over)
        notify.json, notify-sent.jsonl    where to post, what was posted (notify.store)
        .groups/<hash of the key>.json    a comparison group's stop decision (stopping)
        report.json                       the axis `kappa report --compare` last chose
    <kappa home>/scheduler/<sweep>.log    a background scheduler's output
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

from orchestrator import paths

NOTIFY_FILE = "notify.json"
NOTIFY_SENT_FILE = "notify-sent.jsonl"
GROUPS_DIR = ".groups"
REPORT_FILE = "report.json"


class RecordedCell(Protocol):
    """What the rule needs of a cell as the registry holds it."""

    @property
    def sweep_name(self) -> str: ...
    @property
    def cell_id(self) -> str: ...
    @property
    def run_dir(self) -> str | None: ...


def sweep_folder(sweep: str) -> Path:
    """``<runs root>/<sweep>/``: the sweep's folder, its cells' run folders inside."""
    return paths.runs_root() / sweep


def cell_folder(sweep: str, cell_id: str) -> Path:
    """Where a new cell's run folder is made: ``<runs root>/<sweep>/<cell id>``."""
    return sweep_folder(sweep) / cell_id


def cell_folders(sweep_dir: Path) -> list[Path]:
    """The cells' run folders in a sweep's folder: its folders but those whose name has a
    dot, which no cell id has (``.groups``, a rerun's ``<id>.prev-<n>``, ``report.json``)."""
    return sorted(d for d in sweep_dir.iterdir() if "." not in d.name and d.is_dir())


def run_folder(cell: RecordedCell) -> Path:
    """Where ``cell`` runs: the folder recorded at submit, else :func:`cell_folder` (a
    submit killed before recording it meant that same folder)."""
    return Path(cell.run_dir) if cell.run_dir else cell_folder(cell.sweep_name, cell.cell_id)


def group_decision_file(sweep_dir: Path, key: str) -> Path:
    """Where a comparison group's decision is written, once, for every member to read."""
    return sweep_dir / GROUPS_DIR / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def scheduler_log(sweep: str) -> Path:
    """Where a background scheduler of ``sweep`` writes its output."""
    return paths.kappa_home() / "scheduler" / f"{sweep}.log"
