"""A job's processes die with its wrapper, and attempts of one log never overlap.

Real processes: the wrapper is SIGKILLed as the issue describes ("kill only the local
executor's wrapper of a running cell"), and a relaunch is submitted while the first
attempt still holds the run lock.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from test_local_executor import WAIT, pid_alive, py, wait_for

from orchestrator.executors.local import VANISHED_EXIT_CODE, LocalExecutor


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + WAIT
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_killing_the_wrapper_kills_the_job_and_its_children(tmp_path: Path) -> None:
    """The child dies with its wrapper (PR_SET_PDEATHSIG); a grandchild that outlives it
    is killed with the job's process group when the executor sees the wrapper gone."""
    pids = tmp_path / "pids"
    job = LocalExecutor().submit(py(f"""
        import os, subprocess, sys, time
        grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pids)!r} + ".tmp", "w").write(f"{{os.getpid()}} {{grand.pid}}")
        os.replace({str(pids)!r} + ".tmp", {str(pids)!r})
        time.sleep(600)
    """), {}, tmp_path, tmp_path / "train.log")
    wait_for(pids)
    child, grandchild = (int(x) for x in pids.read_text().split())
    os.kill(job.pid, signal.SIGKILL)  # only the wrapper
    assert _gone(child), "the trainer outlived its wrapper"
    assert job.wait(WAIT) == -signal.SIGKILL
    assert _gone(grandchild), "a process of the job outlived the job"


def test_a_reattached_job_whose_wrapper_died_is_cleared_too(tmp_path: Path) -> None:
    """A new orchestrator (reattach, no Popen) finds the wrapper gone: same clean-up."""
    pids = tmp_path / "pids"
    first = LocalExecutor().submit(py(f"""
        import os, subprocess, sys, time
        grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pids)!r}, "w").write(str(grand.pid))
        time.sleep(600)
    """), {}, tmp_path, tmp_path / "train.log")
    wait_for(pids)
    while not pids.read_text().strip():
        time.sleep(0.01)
    grandchild = int(pids.read_text())
    os.kill(first.pid, signal.SIGKILL)
    first._popen.wait()  # type: ignore[union-attr]  # reap it as its parent would
    assert LocalExecutor().reattach(first.job_id) is None  # vanished: no exit recorded
    again = LocalExecutor()
    handle = again.submit(py("print('second attempt')"), {}, tmp_path, tmp_path / "train.log")
    # The first attempt's handle, polled by anyone, clears what is left of its group.
    assert first.poll() == -signal.SIGKILL or first.poll() == VANISHED_EXIT_CODE
    assert _gone(grandchild)
    assert handle.wait(WAIT) == 0


def test_a_relaunch_waits_for_the_previous_attempt(tmp_path: Path) -> None:
    """Two jobs writing one log (two attempts of a cell) never run at the same time."""
    go = tmp_path / "go"
    marks = tmp_path / "marks"
    body = f"""
        import os, sys, time
        with open({str(marks)!r}, "a") as fh: fh.write(f"start {{sys.argv[1]}}\\n")
        while sys.argv[1] == "a" and not os.path.exists({str(go)!r}): time.sleep(0.02)
        with open({str(marks)!r}, "a") as fh: fh.write(f"end {{sys.argv[1]}}\\n")
    """
    ex = LocalExecutor(max_parallel=2)
    a = ex.submit((*py(body), "a"), {}, tmp_path, tmp_path / "train.log")
    wait_for(marks)
    b = ex.submit((*py(body), "b"), {}, tmp_path, tmp_path / "train.log")
    # b's wrapper says it waits; b itself has not started.
    deadline = time.monotonic() + WAIT
    while "waiting for the previous attempt" not in (tmp_path / "train.log").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert marks.read_text() == "start a\n"
    go.touch()
    assert a.wait(WAIT) == 0 and b.wait(WAIT) == 0
    assert marks.read_text() == "start a\nend a\nstart b\nend b\n"
    # Other logs in the same folder are other cells: they do not wait.
    c = ex.submit(py("print('c')"), {}, tmp_path, tmp_path / "other.log")
    assert c.wait(WAIT) == 0
