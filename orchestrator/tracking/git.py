"""The source version a run was launched from."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_commit(path: Path | None = None) -> str | None:
    """The commit checked out at ``path`` (default: the current folder), or ``None``
    outside a git repository or before its first commit. A dirty tree gets ``-dirty``."""
    cwd = str(path) if path is not None else None
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
        if head.returncode != 0 or not head.stdout.strip():
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = head.stdout.strip()
    return f"{commit}-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else commit
