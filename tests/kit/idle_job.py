"""A job handle whose job never ends: for tests where only what the loop asks matters."""

from __future__ import annotations

from orchestrator.executors.base import JobHandle


class IdleJob(JobHandle):
    """Runs forever, ends only when the test says so (it never does)."""

    def __init__(self, job_id: str = "idle") -> None:
        self.job_id = job_id

    def poll(self) -> int | None:
        return None

    def wait(self, timeout: float | None = None) -> int | None:
        return None

    def cancel(self) -> None:
        return None
