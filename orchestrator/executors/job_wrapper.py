"""The tiny process between an executor (local, SLURM) and a job.

Run as ``python -I -S job_wrapper.py JOB_DIR -- ARGV...`` (importing only the standard library's
:mod:`orchestrator.runs.jobs`), it records ARGV's exit code (negative: that signal) in
JOB_DIR/``exit`` beside the executor's ``pid.json``, so a *later* orchestrator tells a running job
from a finished or vanished one. It leads the job's process group and ignores SIGTERM: ARGV gets the
group's signal, and the wrapper stays to record the end.

Two guards keep attempts of one run folder from overlapping: ARGV dies with the wrapper
(``PR_SET_PDEATHSIG``; the executor kills whatever else is left in the group), and every attempt
writing one log runs under one lock, ``.jobs/<log name>.lock``, handed down to ARGV so that it is
held while any process of the attempt lives. A relaunch waits for it (``KAPPA_RUN_LOCK_WAIT``
seconds, default 600), then exits 75 rather than run beside it."""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

if not __package__:  # run as a script, isolated: the orchestrator package is two folders up
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from orchestrator.runs.jobs import write_exit  # the standard library only

PR_SET_PDEATHSIG = 1
LOCK_BUSY_EXIT = 75  # EX_TEMPFAIL: the folder's earlier attempt is still running


def _take_run_lock(job_dir: str) -> int | None:
    """The folder's run lock as an fd; ``None`` if an earlier attempt kept it too long."""
    folder, name = os.path.split(os.path.abspath(job_dir))
    path = os.path.join(folder, name.rsplit(".", 1)[0] + ".lock")  # <log name>.lock
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:  # read here, on the standard library: the kappa command that started the job
        # refused a bad value already (orchestrator.configuration.check_environment)
        wait = float(os.environ.get("KAPPA_RUN_LOCK_WAIT", "600"))
    except ValueError:
        wait = 600.0
    deadline = time.monotonic() + wait
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            if not told:
                print("kappa: waiting for the previous attempt in this folder to exit",
                      file=sys.stderr, flush=True)
                told = True
            time.sleep(0.2)


def _die_with(parent: int) -> None:
    """In the child before exec: be SIGKILLed when the wrapper dies (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (OSError, AttributeError):
        return  # not Linux: the executor's group kill remains
    if os.getppid() != parent:  # the wrapper died before the guard was set
        os._exit(128 + int(signal.SIGKILL))


def main(argv: list[str]) -> int:
    """Run ``argv[2:]`` (after ``JOB_DIR --``), recording pid and exit code in JOB_DIR."""
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: job_wrapper.py JOB_DIR -- ARGV...\n")
        return 2
    job_dir, command = argv[0], argv[2:]
    for signum in (signal.SIGTERM, signal.SIGINT):
        # Stay alive when the job's group is signalled (the child gets the signal too); a
        # handler, not SIG_IGN, which the child would inherit through exec.
        signal.signal(signum, lambda *_: None)
    lock = _take_run_lock(job_dir)
    wrapper = os.getpid()
    if lock is None:
        sys.stderr.write("kappa: an earlier attempt still runs in this folder; not starting\n")
        code = LOCK_BUSY_EXIT
    else:
        try:
            child = subprocess.Popen(command, pass_fds=(lock,),
                                     preexec_fn=lambda: _die_with(wrapper))
        except OSError as exc:
            sys.stderr.write(f"kappa: could not start {command[0]!r}: {exc}\n")
            code = 127
        else:
            os.close(lock)  # the child holds it now, for as long as it lives
            code = child.wait()
    write_exit(Path(job_dir), code)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
