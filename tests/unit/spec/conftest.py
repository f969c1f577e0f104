"""Fixtures for spec tests: state in a tmp dir, and the real kappa CLI in-process."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

KappaRunner = Callable[[list[str]], tuple[int, str, str]]


@pytest.fixture(autouse=True)
def kappa_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep any state the code under test writes in a tmp dir."""
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "kappa-home"))


@pytest.fixture
def kappa(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> KappaRunner:
    """Run the real ``kappa`` entry point in-process: ``kappa(args) -> (code, out, err)``."""
    from orchestrator.cli.app import main

    def run(args: list[str]) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["kappa", *args])
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run
