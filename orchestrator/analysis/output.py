"""Where a command's result goes. A file (``--out``, ``--json``) is checked before any work
and written whole or not at all, its folder made; one that cannot be written is an error
naming the option, never a traceback. Standard output gets the exact text, except on a
terminal, which shows each control character of a value as its escape (as ``ls`` shows a
file name) instead of acting on it: a label's ``\\x1b]0;...`` would retitle the window. A
log keeps its colours and line layout there, and only those (as ``less -R`` shows it)."""

from __future__ import annotations

import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from orchestrator.errors import Problem, UserInputError
from orchestrator.redact import lines_shown, one_line
from orchestrator.runs.atomic import replacing


def _refused(path: Path, option: str, why: str) -> UserInputError:
    return UserInputError(f"{option}: cannot write {path}", [Problem(
        option, why, found=str(path),
        fix=f"give {option} the path of a new or regular file in a folder you can write")])


def checked(path: Path, option: str) -> Path:
    """Where ``option`` writes (a link followed): a regular file, or a new one. A folder,
    FIFO, device or socket is refused unopened: a FIFO waits for a reader forever, and the
    atomic write's rename would replace a device (``/dev/null``)."""
    target = path.resolve()
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        folder = next(p for p in target.parents if p.exists())
        if not folder.is_dir():
            raise _refused(path, option, f"{folder} is not a folder") from None
        return target
    except OSError as exc:
        raise _refused(path, option, exc.strerror or str(exc)) from None
    if stat.S_ISDIR(mode):
        raise _refused(path, option, "this is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise _refused(path, option, "this is not a regular file (a FIFO, device or socket)")
    return target


def write(path: Path, content: str | bytes | Callable[[Path], None], option: str) -> Path:
    """Write ``content`` (UTF-8 text, or a function filling the file it is given) to
    ``path`` as the module's docstring says; returns ``path``."""
    target = checked(path, option)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with replacing(target) as tmp:
            if callable(content):
                content(tmp)
            else:
                tmp.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    except OSError as exc:
        raise _refused(path, option, f"cannot be written: {exc.strerror or exc}") from None
    return path


def shown(text: str, stream: TextIO) -> str:
    """``text`` as ``stream`` should get it (see the module's docstring)."""
    return lines_shown(text) if getattr(stream, "isatty", lambda: False)() else text


# What a program's output may do to a terminal: colour (SGR), break and tab its lines.
_LOG_LAYOUT = re.compile(r"(\x1b\[[0-9;:]*m|[\n\r\t])")


def log_writer(stream: TextIO) -> Callable[[str], None]:
    """What writes a program's output to ``stream`` piece by piece, flushed: exact on a pipe
    or a file; on a terminal with every other control character or escape sequence shown
    as its escape (a log line is never a command to the terminal)."""
    tty = getattr(stream, "isatty", lambda: False)()

    def write(text: str) -> None:
        stream.write("".join(part if i % 2 else one_line(part) for i, part in
                             enumerate(_LOG_LAYOUT.split(text))) if tty else text)
        stream.flush()
    return write
