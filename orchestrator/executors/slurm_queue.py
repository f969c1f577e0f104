"""What state a SLURM job is in: :class:`SlurmQueue` asks ``squeue`` about all this user's jobs at
once (at most once a second), ``sacct`` (with accounting) about one the controller forgot. A failing
``squeue`` ends no job: one it does not know is :data:`UNREACHABLE`."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping

from orchestrator.errors import KappaError

log = logging.getLogger(__name__)

STATUS_CACHE_S = 1.0
UNREACHABLE = "UNREACHABLE"  # the state of a job while the controller does not answer squeue
# States in which a job may still run (or run again).
ACTIVE_STATES = frozenset({
    UNREACHABLE, "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "STOPPED",
    "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT",
    "RESV_DEL_HOLD", "POWER_UP_NODE"})
# What a job that SLURM ended reports when it left no nonzero code of its own.
ENDED_BY_SLURM = {
    **dict.fromkeys(("CANCELLED", "TIMEOUT", "PREEMPTED", "DEADLINE"), -int(signal.SIGTERM)),
    **dict.fromkeys(("NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"), -int(signal.SIGKILL))}


class SlurmError(KappaError):
    """A SLURM command failed (sbatch refused a job, the controller is unreachable)."""


class SlurmUnreachable(SlurmError, ConnectionError):
    """The SLURM controller did not answer (not the job's fault): a ``ConnectionError``."""


def run_slurm(argv: list[str],
              env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a SLURM command; :class:`SlurmError` if it cannot be run at all."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60,
                              check=False)
    except FileNotFoundError as exc:
        raise SlurmError(f"{argv[0]} not found: the slurm executor needs SLURM's commands "
                         "(sbatch, squeue, scancel) on PATH") from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{argv[0]}: {exc}") from exc


def _decode_status(raw: str) -> int | None:
    """squeue's ``exit_code`` (a raw wait status) as a contract exit code."""
    try:
        return os.waitstatus_to_exitcode(int(raw))
    except ValueError:  # not a number, or not the status of an ended process
        return None


def _decode_exit(text: str) -> int | None:
    """sacct's ``ExitCode`` ``N:S`` as a contract exit code."""
    code, _, sig = text.partition(":")
    try:
        return -int(sig) if sig and int(sig) > 0 else int(code)
    except ValueError:
        return None


class SlurmQueue:
    """The states of this user's SLURM jobs (see the module docstring)."""

    def __init__(self) -> None:
        self._states: dict[str, tuple[str, int | None]] = {}
        self._states_at = -1e9
        self._accounting: bool | None = None
        self._unreachable: str | None = None  # why the last squeue failed

    def forget(self) -> None:
        """Ask squeue again on the next question (a job was just submitted)."""
        self._states_at = -1e9

    def job_state(self, slurm_id: str, fresh: bool = False) -> tuple[str, int | None] | None:
        """``(state, exit code)`` of a job: squeue's, else sacct's, else ``None``."""
        if fresh or time.monotonic() - self._states_at > STATUS_CACHE_S:
            self._refresh_states()
        known = self._states.get(slurm_id)
        if known is None and self._unreachable is not None:
            return UNREACHABLE, None  # not known is not vanished: it counts as still there
        return known if known is not None else self._sacct_state(slurm_id)

    def _refresh_states(self) -> None:
        try:
            done = run_slurm(["squeue", "--noheader", "--states=all",
                              f"--user={os.getuid()}", "--Format=JobID:|,State:|,exit_code:|"])
        except SlurmError as exc:
            self._squeue_failed(str(exc))
            return
        if done.returncode != 0:
            self._squeue_failed(done.stderr.strip() or done.stdout.strip())
            return
        self._unreachable = None
        rows = ([f.strip() for f in line.split("|")] for line in done.stdout.splitlines())
        self._states = {r[0]: (r[1], _decode_status(r[2])) for r in rows if len(r) >= 3 and r[0]}
        self._states_at = time.monotonic()

    def _squeue_failed(self, why: str) -> None:
        """Keep what squeue said last; ask again after :data:`STATUS_CACHE_S`."""
        if self._unreachable is None:
            log.warning("squeue failed (jobs count as still running until it answers): %s", why)
        self._unreachable, self._states_at = why, time.monotonic()

    def _sacct_state(self, slurm_id: str) -> tuple[str, int | None] | None:
        if self._accounting is False:
            return None
        try:
            done = run_slurm(["sacct", "--noheader", "--allocations", "--parsable2",
                              f"--jobs={slurm_id}", "--format=State,ExitCode"])
        except SlurmError:
            return None
        if done.returncode != 0:
            # "Slurm accounting storage is disabled": ask no more.
            self._accounting = "disabled" not in done.stderr
            return None
        self._accounting = True
        for line in done.stdout.splitlines():
            state, _, exit_code = line.partition("|")
            if state:
                return state.split()[0], _decode_exit(exit_code)  # "CANCELLED by 0": CANCELLED
        return None
