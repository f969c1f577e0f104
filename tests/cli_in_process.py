"""Run the ``kappa`` CLI inside the test process: its own code, no new interpreter."""

from __future__ import annotations

import os
import sys

import pytest

from orchestrator.cli.app import main


def kappa(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run ``kappa ARGS``: (exit code, stdout + stderr). Tables print unwrapped (a wide
    ``COLUMNS``), so a test can look for a phrase whatever terminal runs it."""
    old_argv, old_columns = sys.argv, os.environ.get("COLUMNS")
    sys.argv = ["kappa", *args]
    os.environ["COLUMNS"] = "400"
    capsys.readouterr()
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old_argv
        if old_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old_columns
    out = capsys.readouterr()
    return code, out.out + out.err
