"""Where results go, on a real sweep whose variant names are hostile text: every file
option (``--out``, ``--output``, ``--json``) refuses what it cannot write, before any work,
exit 2, naming itself; a write that fails leaves no file; a terminal gets a value's control
characters as escapes while a pipe gets the exact data."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.cli import run_kappa, user_error
from kit.full_disk import no_space
from kit.home import use_home
from kit.tiny_spec import tiny_embedded

NAME = "hostile-out"
TITLE = "\x1b]0;pwned\x07"  # would retitle the terminal
VARIANTS = {f"a{TITLE}b": {"kl_coef": 0.001}, "$\\frac$|<!here>": {"kl_coef": 0.002}}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from orchestrator.sweeps.driver import submit

    root = tmp_path_factory.mktemp("outputs")
    with pytest.MonkeyPatch.context() as mp:
        use_home(root / "home", mp)
        spec = root / "spec.yaml"
        spec.write_text(tiny_embedded(NAME, {"variant": VARIANTS}, max_steps=2))
        submit(spec, wait=True, max_parallel=2)
        yield root / "home"


@pytest.fixture
def in_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KAPPA_HOME", str(home))
    return home


def _kappa_on_a_terminal(home: Path, *args: str) -> bytes:
    """``kappa ARGS`` with a pseudo-terminal as its standard output: what it wrote there."""
    parent, child = pty.openpty()
    env = {**os.environ, "KAPPA_HOME": str(home), "COLUMNS": "400"}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", *args], stdout=child,
                            stderr=subprocess.DEVNULL, env=env)
    os.close(child)
    got = b""
    with contextlib.suppress(OSError):  # EIO: the child closed the terminal
        while select.select([parent], [], [], 120)[0] and (chunk := os.read(parent, 65536)):
            got += chunk
    os.close(parent)
    assert proc.wait(timeout=120) == 0, got
    return got


@pytest.mark.parametrize("args", [("table", NAME, "-f", "csv"), ("table", NAME, "-f", "html"),
                                  ("export", NAME)])
def test_a_terminal_is_shown_escapes_and_a_pipe_gets_the_exact_data(
        in_home: Path, args: tuple[str, ...]) -> None:
    shown = _kappa_on_a_terminal(in_home, *args)
    assert b"\x1b]" not in shown and b"\x07" not in shown, shown
    assert b"a\\x1b]0;pwned\\x07b" in shown
    piped = subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True,
                           env={**os.environ, "KAPPA_HOME": str(in_home)}, check=True,
                           timeout=120).stdout
    assert TITLE.encode() in piped  # data, kept exact where it is not displayed


@pytest.fixture
def refusals(tmp_path: Path) -> Iterator[list[Path]]:
    """Targets no file option may write: a FIFO, a folder, a path under a file, a device."""
    fifo = tmp_path / "a.fifo"
    os.mkfifo(fifo)
    # A reader is open, so a write the command should not make would not block the test.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    (tmp_path / "null-link").symlink_to(os.devnull)
    yield [fifo, tmp_path, a_file / "under-a-file.csv", tmp_path / "null-link"]
    assert os.read(reader, 1) == b""  # nothing was written to the FIFO
    os.close(reader)


@pytest.mark.parametrize(("args", "option"), [
    (("table", NAME, "-o"), "--out"), (("export", NAME, "-o"), "--out"),
    (("export", NAME, "-f", "parquet", "-o"), "--out"), (("report", NAME, "-o"), "--out"),
    (("schema", "-o"), "--output"),
    (("seed-check", NAME, "--delta", "variant=x", "--json"), "--json"),
    (("stop-check", NAME, "--json"), "--json"),
])
def test_a_file_option_refuses_what_it_cannot_write(
        in_home: Path, tmp_path: Path, refusals: list[Path], capsys: pytest.CaptureFixture[str],
        args: tuple[str, ...], option: str) -> None:
    for target in refusals:
        (problem,) = user_error(capsys, *args, str(target)).problems
        assert problem.location == option and problem.found == str(target), target
        assert "give " + option in (problem.fix or "")
    assert Path(os.devnull).is_char_device()  # not replaced by a regular file
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("args", [("table", NAME), ("export", NAME, "-f", "parquet"),
                                  ("report", NAME), ("schema",)])
def test_a_write_that_fails_is_an_error_and_leaves_no_file(
        in_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]) -> None:
    from orchestrator.analysis import output

    made = tmp_path / "new" / "folder" / "result"
    assert run_kappa(capsys, *args, "-o", str(made)).code == 0
    assert made.stat().st_size > 0  # a missing folder is made


    monkeypatch.setattr(output, "replacing", no_space)
    target = tmp_path / "full-disk"
    (problem,) = user_error(capsys, *args, "-o", str(target)).problems
    assert "No space left on device" in problem.message and not target.exists()


def test_a_log_keeps_its_colours_on_a_terminal_and_nothing_else(in_home: Path) -> None:
    from orchestrator.registry import Registry
    from orchestrator.runs import layout
    from orchestrator.runs.folder import LOG_FILE

    with Registry.open() as reg:
        cell = reg.cells(NAME)[0]
    log = layout.run_folder(cell) / LOG_FILE
    hostile = (f"\x1b[31mred\x1b[0m step 3\r\n{TITLE}\x1b[2J\x1b]52;c;cHduZWQ=\x07"
               "\x9b6n\u202eevil\tend\n")
    with log.open("a", encoding="utf-8") as fh:
        fh.write(hostile)
    shown = _kappa_on_a_terminal(in_home, "logs", cell.cell_id)
    assert b"\x1b[31mred\x1b[0m step 3" in shown  # its colours, kept
    for act in (b"\x1b]", b"\x07", b"\x1b[2J", "\x9b".encode(), "\u202e".encode()):
        assert act not in shown, act
    assert b"\\x1b]0;pwned\\x07\\x1b[2J\\x1b]52;c;cHduZWQ=\\x07\\x9b6n\\u202eevil\tend" in shown
    piped = subprocess.run([sys.executable, "-m", "orchestrator", "logs", cell.cell_id],
                           capture_output=True, env={**os.environ, "KAPPA_HOME": str(in_home)},
                           check=True, timeout=120).stdout
    assert piped.endswith(hostile.encode())  # the file's bytes, exact
