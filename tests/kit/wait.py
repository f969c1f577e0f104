"""Waiting in tests for something another process does."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], what: str, *, timeout: float = 180,
               every: float = 0.05) -> None:
    """Poll ``predicate()`` every ``every`` seconds until it is true; fail (not flake)
    only after ``timeout`` seconds, a guard against hangs, never a speed assertion."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(every)
