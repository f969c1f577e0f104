"""A Ray Jobs API client whose every request gives up after a bounded time.

Ray's ``JobSubmissionClient`` sends its HTTP requests without a timeout, so a dashboard
that accepts a TCP connection and never answers (a hung head, a firewall that drops
replies, a wrong port on a busy proxy) would hold the caller forever: ``kappa submit``,
``resume``, ``status``, ``cancel`` and ``doctor`` all did. Every kappa use of the Jobs
API goes through :func:`bounded_client`, and :func:`no_answer` tells "the cluster did not
answer" (worth waiting out, never a verdict on a job) from "the cluster said no".
"""

from __future__ import annotations

from typing import Any

# Seconds one Jobs API request may take (the dashboard answers in milliseconds when up).
REQUEST_TIMEOUT_S = 30.0


def bounded_client(address: str, timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
    """A ``JobSubmissionClient`` for ``address`` whose every request (the version check
    made as it is built included) gives up after ``timeout_s`` seconds."""
    from ray.job_submission import JobSubmissionClient

    class BoundedClient(JobSubmissionClient):
        def _do_request(self, *args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", timeout_s)
            return super()._do_request(*args, **kwargs)

    return BoundedClient(address)


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
