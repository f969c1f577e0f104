"""The source version a run was launched from."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_commit(path: Path | None = None) -> str | None:
    """The commit checked out at ``path`` (default: the current folder), or ``None``
    outside a git repository or before its first commit. A dirty tree gets ``-dirty``."""
    def git(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=path, capture_output=True, text=True,
                              check=False, timeout=timeout)

    try:
        head = git("rev-parse", "--verify", "--quiet", "HEAD", timeout=10)
        if head.returncode != 0 or not head.stdout.strip():
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no", timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = head.stdout.strip()
    return f"{commit}-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else commit
