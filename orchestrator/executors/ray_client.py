"""The Ray Jobs API as kappa uses it: a client whose every request gives up in time (Ray's has no
timeout: a dashboard that never answers would hold ``kappa submit`` forever), and one job tracked
through it (:class:`RayJob`). :func:`no_answer` tells "no answer" (waited out, never a verdict on a
job) from "the cluster said no"."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.errors import KappaError, UserInputError
from orchestrator.executors.base import JobHandle, poll_until

LOG = logging.getLogger(__name__)
# Ray lets these variables replace the address its Jobs and State API clients are given
# (ray.dashboard.utils.get_address_for_submission_client): an explicit --ray-address or
# -E address= would silently go elsewhere, past kappa's check of the option.
_ADDRESS_OVERRIDES = ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS")
_ENV_LOCK = threading.Lock()

# Seconds one Jobs API request may take (the dashboard answers in milliseconds when up).
REQUEST_TIMEOUT_S = 30.0
JOB_ID_PREFIX = "ray-jobs:"
# Ray reports a stopped job without an exit code; report it like a SIGTERMed process.
STOPPED_EXIT_CODE = -int(signal.SIGTERM)
POLL_INTERVAL_S = 1.0


def dashboard_url(address: str) -> str:
    """``address`` with Ray's default ``http://`` when it has no scheme: a URL, whose
    password :func:`~orchestrator.redact.redact` masks in messages."""
    return address if "://" in address or address == "auto" else f"http://{address}"


def bounded_client(address: str, timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
    """A ``JobSubmissionClient`` for ``address`` whose every request gives up after
    ``timeout_s`` (the version check made as it is built included)."""
    from ray.job_submission import JobSubmissionClient

    class BoundedClient(JobSubmissionClient):
        def _do_request(self, *args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", timeout_s)
            return super()._do_request(*args, **kwargs)

    with exactly_this_address():
        return BoundedClient(dashboard_url(address))


@contextlib.contextmanager
def exactly_this_address() -> Iterator[None]:
    """Keep the environment from replacing the address a Ray client resolves meanwhile."""
    with _ENV_LOCK:
        saved = {k: os.environ.pop(k) for k in _ADDRESS_OVERRIDES if k in os.environ}
        try:
            yield
        finally:
            os.environ.update(saved)


def no_answer(exc: BaseException) -> bool:
    """Whether ``exc`` means the Jobs API was not reached or did not answer in time."""
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


def ask(address: str, timeout_s: float, what: str, request: Any, *args: Any, **kwargs: Any) -> Any:
    """``request(*args, **kwargs)``; no answer becomes a :class:`RayUnreachableError`."""
    try:
        return request(*args, **kwargs)
    except Exception as exc:
        if not no_answer(exc):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise RayUnreachableError(
            f"the Ray Jobs API at {address} did not answer {what} within {timeout_s:g} s "
            f"({type(exc).__name__}: {first})") from exc


def status_name(status: Any) -> str:
    """Ray's name for a job status (an enum in newer Ray, a string in older)."""
    return str(getattr(status, "value", status))


class RayJob(JobHandle):
    """One Ray job, id ``ray-jobs:<submission id>``. ``poll`` appends what is new of its log
    (on the cluster) to ``log_path``, the offset kept beside it for a reattached handle."""

    def __init__(self, client: Any, submission_id: str, log_path: Path | None,
                 address: str = "", timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self._client = client
        self._address = address
        self._timeout_s = timeout_s
        self.submission_id = submission_id
        self.job_id = JOB_ID_PREFIX + submission_id
        self.log_path = log_path
        self._exit: int | None = None

    def _ask(self, method: str, *args: Any) -> Any:
        return ask(self._address, self._timeout_s, f"{method} for job {self.submission_id}",
                    getattr(self._client, method), *args)

    def poll(self) -> int | None:
        """``None`` while pending or running, else the exit code (logs synced first). No
        answer means "still running": a job's end is what Ray reports, never a guess."""
        if self._exit is not None:
            return self._exit
        try:
            status = status_name(self._ask("get_job_status", self.submission_id))
            self.sync_logs()
        except RayUnreachableError as exc:
            LOG.warning("%s; job %s counts as still running", exc, self.job_id)
            return None
        if status in ("PENDING", "RUNNING"):
            return None
        self._exit = self._exit_code(status)
        return self._exit

    def _exit_code(self, status: str) -> int:
        if status == "SUCCEEDED":
            return 0
        if status == "STOPPED":
            return STOPPED_EXIT_CODE
        code = getattr(self._ask("get_job_info", self.submission_id), "driver_exit_code", None)
        return int(code) if code not in (None, 0) else 1

    def wait(self, timeout: float | None = None) -> int | None:
        """Poll until the job ends or ``timeout`` seconds pass."""
        return poll_until(self.poll, timeout, POLL_INTERVAL_S, POLL_INTERVAL_S)

    def cancel(self) -> None:
        """Ask Ray to stop the job (SIGTERM to the driver, then SIGKILL); idempotent."""
        if self._exit is not None:
            return
        with contextlib.suppress(RuntimeError):  # already finished or unknown to Ray
            self._ask("stop_job", self.submission_id)

    def sync_logs(self) -> None:
        """Append the part of the job's log not yet written to ``log_path``."""
        if self.log_path is None:
            return
        offset_file = self.log_path.with_name(self.log_path.name + ".ray-offset")
        try:
            offset = int(offset_file.read_text())
        except (OSError, ValueError):
            offset = 0
        text = str(self._ask("get_job_logs", self.submission_id))  # all of it, as Ray holds it
        if len(text) <= offset:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(text[offset:])
        offset_file.write_text(str(len(text)))
