"""One scheduler per sweep: an advisory lock file held while a scheduler drives it.

The lock is ``fcntl.flock`` on ``<KAPPA_HOME>/locks/<sweep>.lock``: the kernel releases it
when the holder dies, even by SIGKILL, so a crashed scheduler never leaves a stale lock
behind and ``kappa resume`` can take over at once. The file also records the holder's
pid, for ``kappa status`` to show. (The lock is per machine: schedulers for one sweep on
different machines share a PostgreSQL registry's advisory lock instead: see
:class:`SweepLock`'s ``engine``.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from orchestrator.errors import KappaError
from orchestrator.paths import kappa_home

if TYPE_CHECKING:
    from sqlalchemy import Engine


class SweepLockedError(KappaError):
    """Another scheduler holds the sweep's lock."""


def lock_path(sweep: str) -> Path:
    """The lock file of ``sweep`` (its name made filesystem-safe)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", sweep)
    return kappa_home() / "locks" / f"{safe}.lock"


class SweepLock:
    """Exclusive, non-blocking ownership of a sweep; use as a context manager.

    With ``engine`` (the registry's), a PostgreSQL registry's advisory lock is taken too,
    so schedulers on different machines sharing that registry exclude each other as well.
    """

    def __init__(self, sweep: str, engine: Engine | None = None) -> None:
        self.sweep = sweep
        self.path = lock_path(sweep)
        self.engine = engine
        self._fd: int | None = None
        self._shared: contextlib.ExitStack | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`SweepLockedError` naming the holder's pid."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SweepLockedError(
                f"sweep '{self.sweep}' is already being driven by another scheduler "
                f"(pid {holder_pid(self.sweep) or '?'}); `kappa status {self.sweep}` "
                "shows its progress") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        if self.engine is not None:
            from orchestrator.registry.locks import sweep_drive_lock

            stack = contextlib.ExitStack()
            if not stack.enter_context(sweep_drive_lock(self.engine, self.sweep)):
                stack.close()
                self.release()
                raise SweepLockedError(
                    f"sweep '{self.sweep}' is already being driven by a scheduler on another "
                    f"machine sharing this registry; `kappa status {self.sweep}` shows its "
                    "progress")
            self._shared = stack

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        if self._shared is not None:
            self._shared.close()
            self._shared = None
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> SweepLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def holder_pid(sweep: str) -> int | None:
    """The pid of the scheduler driving ``sweep`` now, or ``None`` if none is."""
    path = lock_path(sweep)
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = path.read_text().strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
