"""Waiting out a tracking store that went away.

MLflow's REST client retries a call a few times (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``) and
then raises. A sweep runs for days; a tracking server restarted for an upgrade must not
fail cells or lose what the scheduler still had to write.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import TypeVar

LOG = logging.getLogger(__name__)
T = TypeVar("T")

# Words in an error that mean "could not reach the store", not "the store said no".
_UNREACHABLE = ("connection refused", "max retries exceeded", "failed to establish",
                "connection reset", "connection aborted", "timed out", "temporarily unavailable",
                "service unavailable", "bad gateway", "database is locked", "name or service",
                "remote end closed", "broken pipe", "connectionerror", "503", "502", "504")


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the tracking store could not be reached (worth waiting for)."""
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    text = f"{type(exc).__name__}: {exc}".lower()
    return any(word in text for word in _UNREACHABLE)


def with_store_retries(work: Callable[[], T], what: str) -> T:
    """``work()``, repeated with backoff while the store is unreachable, for up to
    ``KAPPA_STORE_RETRY_SECONDS`` (default 300); the last error is raised after."""
    try:
        budget = max(0.0, float(os.environ.get("KAPPA_STORE_RETRY_SECONDS", "300")))
    except ValueError:
        budget = 300.0
    deadline = time.monotonic() + budget
    pause = 0.5
    warned = False
    while True:
        try:
            return work()
        except Exception as exc:
            if not is_unreachable(exc) or time.monotonic() + pause > deadline:
                raise
            if not warned:
                LOG.warning("%s: tracking store unreachable, retrying for up to %.0f s (%s)",
                            what, deadline - time.monotonic(),
                            (str(exc).splitlines() or [""])[0][:160])
                warned = True
        time.sleep(pause)
        pause = min(pause * 2, 15.0)
