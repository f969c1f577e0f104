"""A disk that is full: a stand-in for :func:`orchestrator.runs.atomic.replacing` that fails
as a full disk does, for tests of a write that must leave no file behind."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def no_space(_path: object) -> Iterator[Path]:
    """Fail at once with ``ENOSPC``, before any file exists."""
    raise OSError(errno.ENOSPC, "No space left on device")
    yield Path()  # a generator, for contextmanager
