"""The SLURM executor: each launch a batch job (docs/slurm.md): a script (:mod:`.slurm_script`),
``sbatch``, ``squeue``/``sacct`` (:mod:`.slurm_queue`) and the exit code left on the shared file
system, ``scancel``; SLURM's own stable interface, on every site (not submitit: it runs pickled
callables, needs ``sacct`` for states and wraps a job in one ``srun``, no room for verl's Ray head
and workers).

A job's folder is the local executor's (so the wrapper's run-folder lock works the same), with
``job.sbatch``, ``job.json``, ``exit`` and ``end.json`` (the final state, which SLURM without
accounting forgets after ``MinJobAge``). Any process reattaches ``slurm:<SLURM id>:<job folder>``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from orchestrator.errors import Problem, UserInputError
from orchestrator.executors.base import Executor, JobHandle, JobResources, poll_until
from orchestrator.executors.local import THREAD_VARS, WRAPPER
from orchestrator.executors.slurm_options import SlurmOptions, _split_args
from orchestrator.executors.slurm_queue import (
    ACTIVE_STATES,
    ENDED_BY_SLURM,
    SlurmError,
    SlurmQueue,
    SlurmUnreachable,
    run_slurm,
)
from orchestrator.executors.slurm_script import BatchJob, batch_script, time_limit_minutes
from orchestrator.runs import jobs
from orchestrator.runs.folder import read_json, write_json

JOB_ID_PREFIX = "slurm:"
# Not passed on from the submitting shell: SLURM sets CUDA_VISIBLE_DEVICES (the batch
# script empties it for CPU jobs), and a Ray cluster the shell pointed at is not the job's
# (a multi-node job sets RAY_ADDRESS to its own; a single-node verl cell starts one).
_NOT_INHERITED = frozenset({"CUDA_VISIBLE_DEVICES", "RAY_ADDRESS"})
# How long submit keeps trying a controller it cannot connect to (restarting, failing over).
SUBMIT_RETRY_S = 60.0
# What sbatch says when there is no cluster to ask (rather than a refusal of the job).
_NO_CLUSTER = ("Unable to contact slurm controller", "Could not establish a configuration")
# What sbatch says when a request failed midway: the controller may have taken the job.
_MAYBE_SUBMITTED = ("timed out", "Socket timed out", "Zero Bytes were transmitted")


def _unreachable(why: str) -> UserInputError:
    return UserInputError("SLURM cannot be reached from here", [Problem(
        "executor", why, fix="run kappa where SLURM's commands work (a login node of the "
                             "cluster), with SLURM_CONF set if the cluster needs it")])


class SlurmJob(JobHandle):
    """One SLURM batch job of a :class:`SlurmExecutor` (this process's or an earlier one's)."""

    def __init__(self, executor: SlurmExecutor, slurm_id: str, job_dir: Path,
                 log_path: Path | None) -> None:
        self.executor = executor
        self.slurm_id = slurm_id
        self.job_dir = job_dir
        self.log_path = log_path
        self.job_id = f"{JOB_ID_PREFIX}{slurm_id}:{job_dir}"
        self._code: int | None = None

    def state(self, fresh: bool = False) -> tuple[str, int | None] | None:
        """SLURM's ``(state, exit code)`` for the job (``None``: SLURM forgot it)."""
        return self.executor.queue.job_state(self.slurm_id, fresh)

    def poll(self, fresh: bool = False) -> int | None:
        """``None`` while the job is queued or runs, else its exit code (``fresh``: ask now)."""
        if self._code is None:  # another process may have recorded the end
            self._code = _recorded(self.job_dir / "end.json", "code")
        if self._code is not None:
            return self._code
        known = self.executor.queue.job_state(self.slurm_id, fresh)
        if known is not None and known[0] in ACTIVE_STATES:
            return None
        state, slurm_code = known if known is not None else ("VANISHED", None)
        code = jobs.read_exit(self.job_dir)
        if code is None:
            code = slurm_code if slurm_code is not None else -int(signal.SIGKILL)
        if code == 0 and state in ENDED_BY_SLURM:
            code = ENDED_BY_SLURM[state]
        self._code = self._record_end(state, code)
        return self._code

    def _record_end(self, state: str, code: int) -> int:
        """Keep the final state beside the job (SLURM may forget it) and note it in the log; the
        first process here does both."""
        try:
            fd = os.open(self.job_dir / "end.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            recorded = _recorded(self.job_dir / "end.json", "code")
            return recorded if recorded is not None else code
        except OSError:
            return code
        with os.fdopen(fd, "w") as fh:
            json.dump({"state": state, "code": code}, fh)
        if state != "COMPLETED" and self.log_path is not None:
            with contextlib.suppress(OSError), open(self.log_path, "a") as log:
                log.write(f"kappa: SLURM job {self.slurm_id} ended {state} (exit code {code})\n")
        return code

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code once the job ends, ``None`` if ``timeout`` passes first."""
        return poll_until(lambda: self.poll(fresh=True), timeout, 0.1, 2.0)

    def cancel(self) -> None:
        """``scancel`` the job (SIGTERM to every process, SIGKILL after KillWait) and wait
        up to ``cancel_wait`` seconds for it to end."""
        if self.poll() is not None:
            return
        done = run_slurm(["scancel", self.slurm_id])
        if done.returncode != 0 and "already completing or completed" not in done.stderr \
                and "Invalid job id" not in done.stderr:
            raise SlurmError(f"scancel {self.slurm_id}: {done.stderr.strip()}")
        self.wait(self.executor.cancel_wait)


class SlurmExecutor(Executor):
    """Runs jobs as SLURM batch jobs (see the module docstring)."""

    name = "slurm"
    job_id_prefix = JOB_ID_PREFIX
    Options = SlurmOptions

    def __init__(self, partition: str | None = None, account: str | None = None,
                 qos: str | None = None, constraint: str | None = None, time_factor: float = 1.5,
                 time_extra_minutes: int = 10, default_time_minutes: int | None = None,
                 max_parallel: int = 64, sbatch_args: tuple[str, ...] = (),
                 cancel_wait: float = 60.0, python: str | None = None) -> None:
        self.partition, self.account, self.qos = partition, account, qos
        self.constraint, self.default_time_minutes = constraint, default_time_minutes
        self.time_factor, self.time_extra_minutes = time_factor, time_extra_minutes
        self.max_parallel = max(1, max_parallel)
        self.sbatch_args = tuple(_split_args(sbatch_args))
        self.cancel_wait = cancel_wait
        self.python = python or sys.executable
        self._active: dict[str, SlurmJob] = {}
        self.queue = SlurmQueue()

    def capacity(self, gpus: int = 0) -> int:
        """How many more jobs kappa may queue now (SLURM decides when they run)."""
        self._active = {k: job for k, job in self._active.items() if job.poll() is None}
        return max(0, self.max_parallel - len(self._active))

    def fits(self, resources: JobResources) -> str | None:
        """Why SLURM would never run a job asking for ``resources`` (``sbatch --test-only``
        with its directives), or ``None``; SLURM out of reach is a :class:`UserInputError`."""
        if resources.nodes > 1 and not resources.self_placing:
            return f"a job over {resources.nodes} nodes must place its own work (verl)"
        with tempfile.TemporaryDirectory(prefix="kappa-slurm-fit-") as tmp:
            folder = Path(tmp)
            script = folder / "fit.sbatch"
            script.write_text(batch_script(self.batch_job(
                ("true",), folder, folder / "fit.log", folder, resources)))
            try:
                done = run_slurm(["sbatch", "--test-only", str(script)])
            except SlurmError as exc:
                raise _unreachable(str(exc)) from None
        if done.returncode == 0:
            return None
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "refused"
        if any(marker in done.stderr for marker in _NO_CLUSTER):
            raise _unreachable(why)
        return (f"SLURM refuses {resources.nodes} node(s) x {resources.cpus} CPU(s), "
                f"{resources.gpus_per_node} GPU(s) per node: {why.removeprefix('sbatch: ')}")

    def time_minutes(self, resources: JobResources) -> int | None:
        """The ``--time`` of a job with ``resources``."""
        return time_limit_minutes(resources.hours, self.time_factor, self.time_extra_minutes,
                                  self.default_time_minutes)

    def batch_job(self, argv: tuple[str, ...], cwd: Path, log_path: Path, job_dir: Path,
                  resources: JobResources) -> BatchJob:
        """What :func:`~.slurm_script.batch_script` makes this executor's script from."""
        return BatchJob(
            argv=tuple(argv), cwd=Path(cwd), log_path=log_path, job_dir=job_dir,
            resources=resources, python=self.python, wrapper=WRAPPER,
            job_name=f"kappa-{Path(cwd).name}", time_minutes=self.time_minutes(resources),
            partition=self.partition, account=self.account, qos=self.qos,
            constraint=self.constraint, sbatch_args=self.sbatch_args)

    def _job_env(self, env: Mapping[str, str], resources: JobResources) -> dict[str, str]:
        inherited = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        return {**inherited, **dict.fromkeys(THREAD_VARS, str(resources.cpus)), **env}  # env wins

    def submit(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: Path, log_path: Path,
               resources: JobResources = JobResources()) -> SlurmJob:
        """Write the job's batch script and ``sbatch`` it with this environment + ``env``."""
        if not argv:
            raise ValueError("argv is empty")
        if resources.nodes > 1 and not resources.self_placing:
            raise ValueError(f"a job over {resources.nodes} nodes must place its own work "
                             "(a verl cell); this one would run on the first node only")
        log_path = Path(log_path).resolve()
        job_dir = jobs.new_job_dir(log_path)
        script = job_dir / "job.sbatch"
        script.write_text(batch_script(self.batch_job(argv, Path(cwd).resolve(), log_path,
                                                      job_dir, resources)))
        slurm_id = self._sbatch(job_dir, script, self._job_env(env, resources))
        write_json(job_dir / jobs.SLURM_RECORD,
                   {"slurm_id": slurm_id, "log": str(log_path), "argv": list(argv)})
        job = SlurmJob(self, slurm_id, job_dir, log_path)
        self._active[job.job_id] = job
        self.queue.forget()  # the next poll asks squeue again
        return job

    def _sbatch(self, job_dir: Path, script: Path, env: Mapping[str, str]) -> str:
        """``sbatch`` the job of ``job_dir``: its SLURM id. A controller out of reach is asked again
        for ``SUBMIT_RETRY_S``; after a failure mid-request the job may exist all the same, so SLURM
        is asked for one with this folder's comment."""
        argv = ["sbatch", "--parsable", f"--comment=kappa:{job_dir}", str(script)]
        deadline = time.monotonic() + SUBMIT_RETRY_S
        while True:
            try:
                done = run_slurm(argv, env=env)
            except SlurmError as exc:
                if "not found" in str(exc):
                    raise
                return self._adopt(job_dir, str(exc))
            if (done.returncode == 0 or "connect failure" not in done.stderr
                    or time.monotonic() > deadline):
                break
            time.sleep(2.0)
        if done.returncode != 0:
            if "connect failure" in done.stderr or any(m in done.stderr for m in _NO_CLUSTER):
                raise SlurmUnreachable(f"sbatch could not reach the SLURM controller for "
                                       f"{SUBMIT_RETRY_S:.0f} s: {done.stderr.strip()}")
            if any(m in done.stderr for m in _MAYBE_SUBMITTED):
                return self._adopt(job_dir, done.stderr.strip())
            raise SlurmError(f"sbatch refused the job: {done.stderr.strip()}")
        # --parsable prints "ID" or "ID;CLUSTER". Anything else (nothing at all: a site's
        # sbatch wrapper that submitted nothing) is no job kappa could follow or cancel.
        slurm_id = done.stdout.strip().split(";")[0]
        if not slurm_id.isdigit():
            raise SlurmError(f"sbatch gave no job id (stdout {done.stdout.strip()[:80]!r}, "
                             f"stderr {done.stderr.strip()[:200]!r})")
        return slurm_id

    def _adopt(self, job_dir: Path, why: str) -> str:
        """The id of the job SLURM holds for ``job_dir`` after a failed sbatch, if any."""
        if found := self._comments().get(f"kappa:{job_dir}"):
            return found
        raise SlurmUnreachable(f"sbatch failed before it answered, and SLURM holds no job "
                               f"for it: {why}")

    def reattach(self, job_id: str) -> SlurmJob | None:
        """The job behind ``job_id`` if SLURM or its folder knows it (``None``: vanished)."""
        if not job_id.startswith(JOB_ID_PREFIX):
            return None
        slurm_id, _, folder = job_id[len(JOB_ID_PREFIX):].partition(":")
        job_dir = Path(folder)
        record = read_json(job_dir / jobs.SLURM_RECORD) or {}
        job = SlurmJob(self, slurm_id, job_dir, Path(record["log"]) if "log" in record else None)
        if _recorded(job_dir / "end.json", "code") is None \
                and self.queue.job_state(slurm_id, fresh=True) is None \
                and jobs.read_exit(job_dir) is None:
            return None
        if job.poll() is None:
            self._active[job.job_id] = job  # it holds a place in the queue until it ends
        return job

    def jobs_for_log(self, log_path: Path, since: datetime | None = None) -> list[str]:
        """Ids of the jobs submitted with ``log_path`` (since ``since``; newest first): the SLURM id
        from the job folder, else from the ``kappa:<job folder>`` comment SLURM keeps; a folder
        whose job never reached SLURM ends the list. :class:`SlurmUnreachable` rather than a guess
        if SLURM does not answer."""
        ids: list[str] = []
        comments: dict[str, str] | None = None
        for job_dir in jobs.job_dirs(log_path, since):
            slurm_id = _recorded_id(job_dir)
            if slurm_id is None:
                if comments is None:
                    comments = self._comments()
                slurm_id = comments.get(f"kappa:{job_dir}")
            if not slurm_id:
                break
            ids.append(f"{JOB_ID_PREFIX}{slurm_id}:{job_dir}")
        return ids

    def _comments(self) -> dict[str, str]:
        done = run_slurm(["squeue", "--noheader", "--states=all", f"--user={os.getuid()}",
                          "--Format=JobID:|,Comment:|"])
        if done.returncode != 0:
            raise SlurmUnreachable(f"squeue: {done.stderr.strip()[:300]}")
        pairs = (line.split("|") for line in done.stdout.splitlines())
        return {p[1].strip(): p[0].strip() for p in pairs if len(p) >= 2 and p[1].strip()}


def _recorded(path: Path, key: str) -> int | None:
    """The whole number under ``key`` in the JSON file ``path`` (``None``: none there)."""
    try:
        return int((read_json(path) or {})[key])
    except (ValueError, KeyError, TypeError):
        return None


def _recorded_id(job_dir: Path) -> str | None:
    """The SLURM id a job folder records (job.json, else the job's own slurm_id file)."""
    found = _recorded(job_dir / jobs.SLURM_RECORD, "slurm_id")
    if found is None:
        found = jobs.read_exit(job_dir, "slurm_id")
    return None if found is None else str(found)
