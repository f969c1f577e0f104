"""Making what kappa prints or logs safe to show: credentials masked, and text from
outside kappa (a spec's values, a program's output) unable to act on a terminal.


A registry or MLflow URL may carry a password (``postgresql://user:secret@host/db``). kappa never
puts such a URL on a command line (child processes get it through their environment) and passes
every message, error and log line that could contain one through :func:`redact`, which masks the
password of every URL-looking substring (with a scheme, or without one as Ray takes its address:
``user:pw@head:8265``) and the value of ``password=...`` key/value pairs (libpq connection strings).
The CLI applies it to everything it writes (:func:`redacted_output`) and to every log record
(:func:`install_log_redaction`), so a message that quotes a URL (a database driver's error, a cell's
``last_error``) cannot leak one either.

>>> redact("cannot reach postgresql://kappa:s3cret@db:5432/reg")
'cannot reach postgresql://kappa:***@db:5432/reg'
>>> redact("ray dashboard kappa:s3cret@head:8265 is down")
'ray dashboard kappa:***@head:8265 is down'
>>> redact("host=db user=kappa password=s3cret dbname=reg")
'host=db user=kappa password=*** dbname=reg'
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

MASK = "***"

# scheme://[user]:password@ -- the password runs to the LAST "@" before the host part
# (an unencoded "@" in a password is common enough), never across "/" or whitespace.
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@'\"]*):(?P<password>[^\s/'\"]*)@")
# user:password@host:port without a scheme (Ray's "head:8265" form). The port is what
# tells it from text that is no address: "mailto:a@b.org", "git@github.com:org/repo" (no
# password before the "@"), "12:30@room" (no port; a user never starts with a digit, so
# "at 12:30@host:80" is not masked either). The token starts at a word's start, never
# inside a URL (its scheme-ful form is _URL_PASSWORD's).
_BARE_PASSWORD = re.compile(
    r"(?<![\w.+\-/:@%~])(?P<head>(?:[A-Za-z_][\w.~%+\-]*)?):(?P<password>[^\s/'\"]*)"
    r"@(?P<host>[A-Za-z0-9][A-Za-z0-9.\-]*|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})(?![\w.]\w)(?!\w)")
# libpq key/value strings and query parameters: password=..., passwd=..., pwd=...
_KEY_PASSWORD = re.compile(
    r"(?P<head>\b(?:password|passwd|pwd)\s*=\s*)(?P<password>'[^']*'|\"[^\"]*\"|[^\s&;,)]+)",
    re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with every password in a URL or ``password=`` pair replaced by ``***``."""
    if "@" not in text and "=" not in text:
        return text
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@", text)
    text = _BARE_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@{m['host']}:{m['port']}", text)
    return _KEY_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)


# What a terminal acts on in a program's output: ESC-introduced sequences (CSI: colours,
# cursor moves, clearing; OSC: the title, links, the clipboard; two-character escapes)
# and the 8-bit CSI.
_ESCAPE_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
                              r"|\x1b[ -~]|\x9b[0-?]*[ -/]*[@-~]")


def one_line(text: str) -> str:
    """``text`` safe on one line of a terminal or a generated file (a YAML comment, a log
    line): every character that is not printable, which includes each line break YAML or a
    terminal knows (``\\n \\r \\v \\f \\x1c-\\x1e \\x85 \\u2028 \\u2029``), every control
    character a terminal acts on (``\\x1b``, ``\\x9b``) and bidi overrides, as its escape."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def lines_shown(text: str) -> str:
    """``text`` with each of its lines as :func:`one_line` shows it (the line breaks kept)."""
    return "\n".join(map(one_line, text.split("\n")))


def without_escape_sequences(text: str) -> str:
    """A program's output without the terminal escape sequences it wrote (its colours,
    title, cursor moves): the text that is left."""
    return _ESCAPE_SEQUENCE.sub("", text)


def has_credentials(url: str) -> bool:
    """Whether ``url`` carries a password (it must then stay off command lines)."""
    return redact(url) != url


def install_log_redaction() -> None:
    """Mask passwords in every log record any logger (kappa's, MLflow's, Ray's) makes. A record
    factory rather than a handler filter: libraries add their own handlers (MLflow's logger does not
    propagate), and every record passes through the factory."""
    factory = logging.getLogRecordFactory()
    if getattr(factory, "kappa_redacting", False):
        return

    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        """A record with its message (and traceback) formatted now, passwords masked."""
        record = factory(*args, **kwargs)
        message = record.getMessage()
        if (masked := redact(message)) != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_info[1] is not None:
            # Handlers format the traceback later, from the exception: format it here, masked.
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return record

    make.kappa_redacting = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(make)


class RedactingStream:
    """A text stream that masks passwords in everything written to it (each ``write``
    call is masked on its own; kappa writes whole messages and lines)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        # flush, isatty, fileno, encoding, ...: the wrapped stream's own.
        return getattr(self._stream, name)


@contextmanager
def redacted_output() -> Iterator[None]:
    """Within the block, ``sys.stdout`` and ``sys.stderr`` mask passwords."""
    out, err = sys.stdout, sys.stderr
    sys.stdout = RedactingStream(out)
    sys.stderr = RedactingStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
