"""One Ray job as kappa's :class:`~.base.JobHandle`, tracked through the Jobs API.

Its id is ``ray-jobs:<submission id>``: with the cluster's address, all any process needs
to rebuild it. Ray keeps the logs on the cluster; ``poll`` appends what is new to
``log_path``, with the offset kept next to it, so a reattached handle continues where the
last one stopped.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from pathlib import Path
from typing import Any

from orchestrator.executors.base import JobHandle, poll_until
from orchestrator.executors.ray_client import REQUEST_TIMEOUT_S, RayUnreachableError, ask

LOG = logging.getLogger(__name__)
JOB_ID_PREFIX = "ray-jobs:"
# Ray reports a stopped job without an exit code; report it like a SIGTERMed process.
STOPPED_EXIT_CODE = -int(signal.SIGTERM)
POLL_INTERVAL_S = 1.0


def status_name(status: Any) -> str:
    """Ray's name for a job status (an enum in newer Ray, a string in older)."""
    return str(getattr(status, "value", status))


class RayJob(JobHandle):
    """One Ray job, tracked by submission id through the Jobs API."""

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
        """``None`` while pending or running, else the exit code (logs are synced first).
        A cluster that does not answer leaves it "still running": a job's end is only
        ever what Ray reports, never a guess from silence."""
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
        info = self._ask("get_job_info", self.submission_id)
        code = getattr(info, "driver_exit_code", None)
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

    def logs(self) -> str:
        """The job's whole log as Ray holds it."""
        return str(self._ask("get_job_logs", self.submission_id))

    def sync_logs(self) -> None:
        """Append the part of the job's log not yet written to ``log_path``."""
        if self.log_path is None:
            return
        offset_file = self.log_path.with_name(self.log_path.name + ".ray-offset")
        try:
            offset = int(offset_file.read_text())
        except (OSError, ValueError):
            offset = 0
        text = self.logs()
        if len(text) <= offset:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(text[offset:])
        offset_file.write_text(str(len(text)))
