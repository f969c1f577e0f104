"""Fixtures for spec tests: state in a tmp dir, and the real kappa CLI in-process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from kit.cli import run_kappa

KappaRunner = Callable[[list[str]], tuple[int, str, str]]


@pytest.fixture(autouse=True)
def kappa_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep any state the code under test writes in a tmp dir."""
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "kappa-home"))


@pytest.fixture
def kappa(capsys: pytest.CaptureFixture[str]) -> KappaRunner:
    """The real ``kappa`` entry point in-process (:func:`kit.cli.run_kappa`, at the terminal's
    width: golden tables): ``kappa(args) -> (code, out, err)``."""
    return lambda args: run_kappa(capsys, *args, wide=False)
