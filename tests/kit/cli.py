"""Run the ``kappa`` CLI: inside the test process (its own code, no new interpreter), or
as a new process with the kit's fake backends registered (:mod:`kit.kappa_main`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import pytest

from kit.kappa_main import KAPPA_SCRIPT
from orchestrator.errors import UserInputError


class Ran(NamedTuple):
    """What one ``kappa`` command did: its exit code and what it printed."""

    code: int
    out: str
    err: str

    @property
    def output(self) -> str:
        """stdout then stderr."""
        return self.out + self.err


def run_kappa(capsys: pytest.CaptureFixture[str], *args: str, wide: bool = True) -> Ran:
    """Run ``kappa ARGS`` through the console script's ``main()`` (its error handling
    included). ``wide``: tables print unwrapped (``COLUMNS=400``), so a test can look for a
    phrase whatever terminal runs it; without it, the terminal's width is left as it is
    (golden files hold tables at the default width)."""
    return _main(capsys, args, wide)[0]


def user_error(capsys: pytest.CaptureFixture[str], *args: str) -> UserInputError:
    """Run ``kappa ARGS`` (as :func:`run_kappa`), which must refuse its input (exit 2):
    the :class:`~orchestrator.errors.UserInputError` that ``main()`` reported, so a test
    can look at its problems (their locations) rather than at their rendering."""
    ran, error = _main(capsys, args, True)
    assert ran.code == 2 and isinstance(error, UserInputError), (ran.code, error, ran.output)
    return error


def _main(capsys: pytest.CaptureFixture[str], args: Sequence[str],
          wide: bool) -> tuple[Ran, BaseException | None]:
    """:func:`run_kappa`, and the exception ``main()`` turned into its exit code (the
    ``SystemExit`` raised while handling it keeps it as its context), if any."""
    from orchestrator.cli.app import main  # the whole CLI: imported when a test runs it

    old_argv, old_columns = sys.argv, os.environ.get("COLUMNS")
    sys.argv = ["kappa", *args]
    if wide:
        os.environ["COLUMNS"] = "400"
    capsys.readouterr()
    error: BaseException | None = None
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        error = exc.__context__
    finally:
        sys.argv = old_argv
        if old_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old_columns
    out = capsys.readouterr()
    return Ran(code, out.out, out.err), error


def kappa(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """:func:`run_kappa`, as (exit code, stdout + stderr)."""
    ran = run_kappa(capsys, *args)
    return ran.code, ran.output


def process(*args: str, code: int | None = 0, timeout: float = 180,
            env: Mapping[str, str] | None = None,
            command: Sequence[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``kappa ARGS`` as a new process (this environment plus ``env``) and wait for
    it (``timeout``: a guard against hangs). ``command`` is the ``kappa`` to run (default:
    :data:`~kit.kappa_main.KAPPA_SCRIPT`, which knows the fake backends). Fails the test
    unless it exits ``code`` (``None``: any code)."""
    argv = [*(command if command is not None else (sys.executable, str(KAPPA_SCRIPT))), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})
    if code is not None and proc.returncode != code:
        raise AssertionError(f"kappa {' '.join(args)} -> {proc.returncode}, not {code}\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc
