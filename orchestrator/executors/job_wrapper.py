"""The tiny process that stands between the local executor and a job.

Run as ``python -I -S job_wrapper.py JOB_DIR -- ARGV...`` (a script, not ``-m``, so that
starting it imports nothing from ``orchestrator``). Together with the executor it leaves
two files in JOB_DIR, so that an orchestrator started *later* (after the one that
submitted the job was killed) can tell a running job from a finished or vanished one:

* ``JOB_DIR/pid.json``  ``{"pid": int, "start_ticks": int, ...}`` — the wrapper's pid
  and start time (``/proc/<pid>/stat``, guarding against pid reuse). The executor writes
  it as soon as the wrapper is started, so it exists by the time ``submit`` returns.
* ``JOB_DIR/exit``      ARGV's exit code (negative: killed by that signal), written
  atomically by the wrapper after ARGV ends.

The wrapper is the leader of the job's own session and process group, so cancelling the
job signals the whole tree. It ignores SIGTERM itself: ARGV receives the signal from the
group kill, and the wrapper stays to record how ARGV ended.

Only the standard library may be used here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def process_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (Linux ``/proc``), or ``None``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; fields after the
    # last ')' are space separated, and starttime is field 22 overall.
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _write_atomically(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _ignore(signum: int, frame: object) -> None:
    """Stay alive when the job's group is signalled; the child gets the signal too."""


def main(argv: list[str]) -> int:
    """Run ``argv[2:]`` (after ``JOB_DIR --``), recording pid and exit code in JOB_DIR."""
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: job_wrapper.py JOB_DIR -- ARGV...\n")
        return 2
    job_dir, command = argv[0], argv[2:]
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _ignore)
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        sys.stderr.write(f"kappa: could not start {command[0]!r}: {exc}\n")
        code = 127
    else:
        code = child.wait()
    _write_atomically(os.path.join(job_dir, "exit"), str(code))
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
