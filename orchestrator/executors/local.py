"""The local executor: jobs as processes on this machine, with GPU and CPU slots.

Each job (argv, never a shell) leads a new session under :mod:`job_wrapper`, so a cancel signals the
whole tree (SIGTERM, SIGKILL after ``grace_period``). Any process reattaches ``local:<job folder>``:
*running* (pid alive, same start time), *finished* (``exit`` exists) or *vanished*. A job needing
``n`` GPUs gets ``n`` free devices in ``CUDA_VISIBLE_DEVICES``; a CPU-only job, cores /
``max_parallel`` threads."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from orchestrator.errors import KappaError
from orchestrator.executors.base import (
    Executor,
    ExecutorOptions,
    JobHandle,
    JobResources,
    poll_until,
)
from orchestrator.limits import MAX_PARALLEL, MAX_WAIT_S
from orchestrator.runs.folder import read_json, write_json
from orchestrator.runs.jobs import PID_RECORD, job_dirs, new_job_dir, read_exit, write_exit
from orchestrator.runs.liveness import is_running, is_stranger, start_ticks

JOB_ID_PREFIX = "local:"
WRAPPER = Path(__file__).with_name("job_wrapper.py")
# Exit code reported for a job whose wrapper died without recording one (SIGKILLed).
VANISHED_EXIT_CODE = -int(signal.SIGKILL)
# The thread-pool sizes a CPU job's libraries read: set from the CPUs the job is given.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def detect_gpus(explicit: Sequence[int | str] | None = None,
                environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Device ids jobs may get: ``explicit``, else ``CUDA_VISIBLE_DEVICES`` (empty: none),
    else one index per GPU ``nvidia-smi -L`` lists."""
    if explicit is not None:
        return tuple(str(g) for g in explicit)
    visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return _device_list(visible)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20,
                                 check=True)
    except (OSError, subprocess.SubprocessError):  # no listing: no GPUs known
        return ()
    count = sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
    return tuple(str(i) for i in range(count))


def cpu_threads_per_job(max_parallel: int, cpu_count: int | None = None) -> int:
    """Threads each of ``max_parallel`` CPU-only jobs gets of the cores this process may use."""
    if cpu_count is None:
        try:
            cpu_count = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cpu_count = os.cpu_count() or 1
    return max(1, cpu_count // max(1, min(max_parallel, cpu_count)))


class NoFreeSlotError(KappaError):
    """``submit`` was called while ``capacity(gpus)`` was zero."""


class LocalJob(JobHandle):
    """A job started by a :class:`LocalExecutor` (in this process or an earlier one)."""

    def __init__(self, job_dir: Path, pid: int, start_ticks: int | None, gpus: tuple[str, ...],
                 grace_period: float, popen: subprocess.Popen[bytes] | None = None) -> None:
        self.job_dir = job_dir
        self.job_id = JOB_ID_PREFIX + str(job_dir)
        self.pid = pid
        self.start_ticks = start_ticks
        self.gpus = gpus
        self.grace_period = grace_period
        self._popen = popen
        self._code: int | None = None

    def poll(self) -> int | None:
        """``None`` while the job runs, else its exit code (negative: killed by a signal)."""
        if self._code is not None:
            return self._code
        if self._popen is not None:
            if self._popen.poll() is None:
                return None
        elif read_exit(self.job_dir) is None and is_running(self.pid, self.start_ticks):
            return None
        # Read again: the wrapper may have written its exit file just before it ended.
        self._code = read_exit(self.job_dir)
        if self._code is None:
            # The wrapper died unrecorded: kill what is left of the group so it cannot run
            # beside a relaunch (Linux reuses a group id only once the group is empty).
            if not is_stranger(self.pid, self.start_ticks):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pid, signal.SIGKILL)
            self._code = VANISHED_EXIT_CODE if self._popen is None else self._popen.returncode
        return self._code

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code once the job ends, ``None`` if ``timeout`` passes first."""
        if self._popen is not None:
            try:
                self._popen.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
            return self.poll()
        return poll_until(self.poll, timeout, 0.01, 0.25)

    def cancel(self) -> None:
        """SIGTERM the job's process group; SIGKILL it if still there after the grace period."""
        if self.poll() is not None:
            return
        self._signal_group(signal.SIGTERM)
        code = self.wait(self.grace_period)
        self._signal_group(signal.SIGKILL)  # stragglers that ignored SIGTERM
        if code is None:
            self.wait(self.grace_period)
        if read_exit(self.job_dir) is None:
            # The wrapper died unrecorded (signalled while starting, or SIGKILLed).
            self._code = -int(signal.SIGTERM if code is not None else signal.SIGKILL)
            write_exit(self.job_dir, self._code)

    def _signal_group(self, signum: signal.Signals) -> None:
        if not is_running(self.pid, self.start_ticks) and self._popen is None:
            return  # the pid may belong to someone else by now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)


def _device_list(value: Any) -> Any:
    """``"0,1"`` (as typed after ``-E gpus=``) or a list: device ids as strings."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return value


class LocalOptions(ExecutorOptions):
    """What a user may set on the local executor."""

    max_parallel: int | None = Field(
        None, ge=1, le=MAX_PARALLEL,
        description="jobs at once (default: one per CPU core, or per GPU)")
    gpus: Annotated[tuple[str, ...] | None, BeforeValidator(_device_list)] = Field(
        None, description="device ids jobs may be given, e.g. 0,1 (default: "
                          "CUDA_VISIBLE_DEVICES, else every GPU nvidia-smi lists)")
    grace_period: float = Field(
        10.0, ge=0, le=MAX_WAIT_S,
        description="seconds a cancelled job gets between SIGTERM and SIGKILL")


class LocalExecutor(Executor):
    """Runs jobs as local processes (see the module docstring)."""

    name = "local"
    job_id_prefix = JOB_ID_PREFIX
    Options = LocalOptions

    def __init__(self, max_parallel: int | None = None, gpus: Sequence[int | str] | None = None,
                 grace_period: float = 10.0, cpu_count: int | None = None,
                 python: str | None = None) -> None:
        self.devices = detect_gpus(gpus)
        self.max_parallel = max(1, max_parallel or max(len(self.devices), os.cpu_count() or 1))
        self.grace_period = grace_period
        self.threads_per_job = cpu_threads_per_job(self.max_parallel, cpu_count)
        self.python = python or sys.executable
        self._active: dict[str, LocalJob] = {}

    def _free_devices(self) -> list[str]:
        busy = {d for job in self._active.values() for d in job.gpus}
        return [d for d in self.devices if d not in busy]

    def running(self) -> int:
        """Jobs this executor knows to be running (submitted or reattached)."""
        self._active = {k: job for k, job in self._active.items() if job.poll() is None}
        return len(self._active)

    def capacity(self, gpus: int = 0) -> int:
        """How many more jobs needing ``gpus`` GPUs could start now."""
        slots = self.max_parallel - self.running()
        if gpus > 0:
            slots = min(slots, len(self._free_devices()) // gpus)
        return max(0, slots)

    def most_gpus(self) -> int:
        """Every device this executor may hand out."""
        return len(self.devices)

    def _job_env(self, env: Mapping[str, str], devices: list[str]) -> dict[str, str]:
        full = dict(os.environ)
        if devices or self.devices:
            full["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        if not devices:
            full.update(dict.fromkeys(THREAD_VARS, str(self.threads_per_job)))
        full.update(env)  # the launch's own settings win
        return full

    def submit(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: Path, log_path: Path,
               resources: JobResources = JobResources()) -> LocalJob:
        """Start ``argv`` in ``cwd`` in its own session, appending to ``log_path``."""
        if not argv:
            raise ValueError("argv is empty")
        if resources.nodes > 1:
            raise ValueError(f"a local job runs on one machine, not {resources.nodes} nodes")
        gpus = resources.gpus
        if self.capacity(gpus) < 1:
            raise NoFreeSlotError(
                f"no free slot for a job needing {gpus} GPU(s): {len(self._active)} running "
                f"of {self.max_parallel}, GPUs {list(self.devices)}")
        devices = self._free_devices()[:gpus]
        log_path = Path(log_path).resolve()
        job_dir = new_job_dir(log_path)
        with open(log_path, "ab") as log:
            popen = subprocess.Popen(
                [self.python, "-I", "-S", str(WRAPPER), str(job_dir), "--", *argv],
                cwd=cwd, env=self._job_env(env, devices), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        ticks = start_ticks(popen.pid)
        write_json(job_dir / PID_RECORD, {"pid": popen.pid, "start_ticks": ticks,
                                          "gpus": devices, "argv": list(argv),
                                          "log": str(log_path)})
        job = LocalJob(job_dir, popen.pid, ticks, tuple(devices), self.grace_period, popen)
        self._active[job.job_id] = job
        return job

    def reattach(self, job_id: str) -> LocalJob | None:
        """The job behind ``job_id`` if it is running or finished; ``None`` if it vanished."""
        if not job_id.startswith(JOB_ID_PREFIX):
            return None
        job_dir = Path(job_id[len(JOB_ID_PREFIX):])
        record = read_json(job_dir / PID_RECORD)
        if record is None:
            return None
        job = LocalJob(job_dir, int(record["pid"]), record.get("start_ticks"),
                       tuple(str(d) for d in record.get("gpus", ())), self.grace_period)
        if job.poll() is None:
            self._active[job.job_id] = job  # it holds a slot (and its GPUs) until it ends
        elif read_exit(job_dir) is None:
            return None  # no exit code recorded and not running: vanished
        return job

    def jobs_for_log(self, log_path: Path, since: datetime | None = None) -> list[str]:
        """Ids of the jobs submitted with ``log_path`` (since ``since``), newest first."""
        return [JOB_ID_PREFIX + str(d) for d in job_dirs(log_path, since)]
