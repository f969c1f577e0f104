"""Waiting out a tracking store that went away.

MLflow's REST client retries a call a few times (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``) and
then raises. A sweep runs for days; a tracking server restarted for an upgrade must not
fail cells or lose what the scheduler still had to write.
"""

from __future__ import annotations

import errno
import logging
import socket
import time
from collections.abc import Callable
from typing import TypeVar

from orchestrator import configuration

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: HTTP answers that mean "not there now" (the store or a gateway before it busy,
#: restarting or away), not "the store said no": a request timed out, too many requests,
#: bad gateway, unavailable, gateway timeout.
UNAVAILABLE_STATUSES = frozenset({408, 429, 502, 503, 504})
_NETWORK_DOWN = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN,
                           errno.EHOSTDOWN})
#: SQLite's primary result codes for "another connection holds the lock" (busy, locked).
SQLITE_BUSY_CODES = frozenset({5, 6})


def _verdict(exc: BaseException) -> bool | None:
    """What ``exc`` alone says: ``True`` the store was not reached, ``False`` it answered
    (no waiting makes it answer otherwise), ``None`` nothing: its causes decide."""
    import sqlite3
    import urllib.error

    if isinstance(exc, ConnectionError | TimeoutError | socket.gaierror) or (
            isinstance(exc, OSError) and exc.errno in _NETWORK_DOWN):
        return True  # refused, reset, timed out, no route, a name that does not resolve
    if getattr(exc, "connection_invalidated", False) is True:
        return True  # SQLAlchemy's own finding: the database connection was lost
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in UNAVAILABLE_STATUSES
    if isinstance(exc, sqlite3.OperationalError):
        code = getattr(exc, "sqlite_errorcode", None)
        return None if code is None else (code & 0xFF) in SQLITE_BUSY_CODES
    status = getattr(exc, "get_http_status_code", None)  # MlflowException, RestException
    if callable(status):
        code = status()
        # 500 is MLflow's code for "no code": the wrapper of a client error, whose cause says.
        return None if code == 500 else code in UNAVAILABLE_STATUSES
    try:
        import requests.exceptions as http
    except ImportError:  # pragma: no cover - requests comes with MLflow
        return None
    if isinstance(exc, http.HTTPError) and exc.response is not None:
        return exc.response.status_code in UNAVAILABLE_STATUSES
    if isinstance(exc, http.ConnectionError | http.Timeout | http.RetryError
                  | http.ChunkedEncodingError):
        return True  # RetryError: the answers were all 429/5xx until urllib3 gave up
    return None


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the tracking store (or a cluster) could not be reached, worth
    waiting for: judged by exception types and HTTP status codes along the chain of its
    causes (``raise ... from``, an error raised while handling another, SQLAlchemy's
    ``orig``, urllib's ``reason``), never by the words of a message (``Run 'ab503f1c9e'
    not found`` is the store's answer, whatever digits the id holds)."""
    pending: list[object] = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop(0)
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        verdict = _verdict(current)
        if verdict is not None:
            return verdict
        pending += [current.__cause__, current.__context__, getattr(current, "orig", None),
                    getattr(current, "reason", None)]
    return False


def with_store_retries(work: Callable[[], T], what: str) -> T:
    """``work()``, repeated with backoff while the store is unreachable, for up to
    ``KAPPA_STORE_RETRY_SECONDS`` (default 300); the last error is raised after."""
    deadline = time.monotonic() + configuration.read("KAPPA_STORE_RETRY_SECONDS")
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
