"""git_commit(): the checked-out commit, ``-dirty`` when changed, None outside a repo."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.tracking import git_commit

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_commit_clean_and_dirty(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    assert git_commit(repo) is None  # no commit yet
    (repo / "a.txt").write_text("1")
    _git(repo, "add", "a.txt")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "one")
    sha = _git(repo, "rev-parse", "HEAD")
    assert git_commit(repo) == sha
    (repo / "a.txt").write_text("2")
    assert git_commit(repo) == f"{sha}-dirty"


def test_outside_a_repository(tmp_path: Path) -> None:
    assert git_commit(tmp_path) is None
    assert git_commit(tmp_path / "missing") is None
