"""A Ray Jobs API client whose every request gives up after a bounded time.

Ray's ``JobSubmissionClient`` sends its HTTP requests without a timeout, so a dashboard
that accepts a TCP connection and never answers (a hung head, a firewall that drops
replies) would hold ``kappa submit``, ``status``, ``cancel``... forever. :func:`no_answer`
tells "the cluster did not answer" (worth waiting out, never a verdict on a job) from
"the cluster said no".
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from orchestrator.errors import KappaError, UserInputError

# Ray lets these variables replace the address its Jobs and State API clients are given
# (ray.dashboard.utils.get_address_for_submission_client): an explicit --ray-address or
# -E address= would silently go elsewhere, past kappa's check of the option.
_ADDRESS_OVERRIDES = ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS")
_ENV_LOCK = threading.Lock()

# Seconds one Jobs API request may take (the dashboard answers in milliseconds when up).
REQUEST_TIMEOUT_S = 30.0


def dashboard_url(address: str) -> str:
    """``address`` with ``http://`` in front when it has no scheme (Ray's own default), so
    every message quotes a URL, whose password :func:`~orchestrator.redact.redact` masks."""
    return address if "://" in address or address == "auto" else f"http://{address}"


def bounded_client(address: str, timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
    """A ``JobSubmissionClient`` for ``address`` whose every request (the version check
    made as it is built included) gives up after ``timeout_s`` seconds."""
    from ray.job_submission import JobSubmissionClient

    class BoundedClient(JobSubmissionClient):
        def _do_request(self, *args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", timeout_s)
            return super()._do_request(*args, **kwargs)

    with exactly_this_address():
        return BoundedClient(dashboard_url(address))


@contextlib.contextmanager
def exactly_this_address() -> Iterator[None]:
    """While a Ray client resolves its address, the environment cannot replace it: the
    address kappa checked is the one used. The variables are back as they were after."""
    with _ENV_LOCK:
        saved = {k: os.environ.pop(k) for k in _ADDRESS_OVERRIDES if k in os.environ}
        try:
            yield
        finally:
            os.environ.update(saved)


def no_answer(exc: BaseException) -> bool:
    """Whether ``exc`` means the Jobs API could not be reached or did not answer in time
    (refused, reset, timed out) rather than answered with a refusal."""
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    try:
        import requests
    except ImportError:  # pragma: no cover - Ray depends on requests
        return False
    return isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout)


class RayJobsError(KappaError):
    """The Ray Jobs API refused a request or is unreachable."""


class RayUnreachableError(RayJobsError, ConnectionError):
    """The Jobs API did not answer: a ``ConnectionError``, so the scheduler sees it as
    "away" (:func:`orchestrator.tracking.retry.is_unreachable`), not as a verdict on a job."""


class RayAddressError(UserInputError, RayJobsError):
    """The cluster named by the executor's address cannot be used (exit 2)."""


def ask(address: str, timeout_s: float, what: str, request: Any, *args: Any,
         **kwargs: Any) -> Any:
    """``request(*args, **kwargs)``, a call of the Jobs API client; no answer becomes a
    :class:`RayUnreachableError` that names the cluster and the wait."""
    try:
        return request(*args, **kwargs)
    except Exception as exc:
        if not no_answer(exc):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise RayUnreachableError(
            f"the Ray Jobs API at {address} did not answer {what} within {timeout_s:g} s "
            f"({type(exc).__name__}: {first})") from exc
