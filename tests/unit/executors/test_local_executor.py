"""The local executor with real processes: logs, exit codes, slots, cancel, reattach."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.errors import UserInputError
from orchestrator.executors import JobResources, get_executor
from orchestrator.executors.local import (
    LocalExecutor,
    NoFreeSlotError,
    cpu_threads_per_job,
    detect_gpus,
)

PY = sys.executable
WAIT = 60.0  # a safety net against hangs, never an assertion about speed


def py(code: str) -> tuple[str, ...]:
    return (PY, "-c", textwrap.dedent(code))


def wait_for(path: Path) -> None:
    """Block until ``path`` exists (a job's way of saying it got somewhere)."""
    probe = subprocess.run(
        [PY, "-c", "import os,sys,time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)",
         str(path)], timeout=WAIT, check=False)
    assert probe.returncode == 0


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_exit_codes_and_appended_log(tmp_path: Path) -> None:
    ex = LocalExecutor(max_parallel=2)
    log = tmp_path / "train.log"
    ok = ex.submit(py("print('first'); import sys; sys.stderr.write('err\\n')"), {}, tmp_path, log)
    assert ok.wait(WAIT) == 0
    bad = ex.submit(py("print('second'); raise SystemExit(3)"), {}, tmp_path, log)
    assert bad.wait(WAIT) == 3
    assert bad.poll() == 3
    text = log.read_text()
    assert "first" in text and "err" in text and "second" in text
    assert text.index("first") < text.index("second")


def test_env_and_cwd_reach_the_job(tmp_path: Path) -> None:
    ex = LocalExecutor(max_parallel=2, cpu_count=4)
    job = ex.submit(py("import os; print(os.getcwd(), os.environ['KAPPA_X'], "
                       "os.environ['OMP_NUM_THREADS'])"),
                    {"KAPPA_X": "hello"}, tmp_path, tmp_path / "log")
    assert job.wait(WAIT) == 0
    cwd, value, threads = (tmp_path / "log").read_text().split()
    assert Path(cwd) == tmp_path.resolve()
    assert value == "hello"
    assert threads == "2"  # 4 cores shared by 2 parallel jobs


def test_missing_program_is_exit_127(tmp_path: Path) -> None:
    job = LocalExecutor().submit(("/nonexistent/kappa-prog",), {}, tmp_path, tmp_path / "log")
    assert job.wait(WAIT) == 127
    assert "could not start" in (tmp_path / "log").read_text()


def test_gpu_slots_are_handed_out_and_returned(tmp_path: Path) -> None:
    ex = LocalExecutor(max_parallel=4, gpus=[0, 1, 2])
    go = tmp_path / "go"
    hold = py(f"""
        import os, time
        print(os.environ['CUDA_VISIBLE_DEVICES'], flush=True)
        while not os.path.exists({str(go)!r}): time.sleep(0.02)
    """)
    two = ex.submit(hold, {}, tmp_path, tmp_path / "a.log", JobResources(gpus=2))
    assert ex.capacity(2) == 0
    assert ex.capacity(1) == 1
    one = ex.submit(hold, {}, tmp_path, tmp_path / "b.log", JobResources(gpus=1))
    assert ex.capacity(1) == 0
    assert ex.capacity(0) == 2  # CPU-only jobs still have slots
    with pytest.raises(NoFreeSlotError):
        ex.submit(hold, {}, tmp_path, tmp_path / "c.log", JobResources(gpus=1))
    cpu = ex.submit(py("import os; print(repr(os.environ['CUDA_VISIBLE_DEVICES']))"), {},
                    tmp_path, tmp_path / "cpu.log")
    assert cpu.wait(WAIT) == 0
    go.touch()
    assert two.wait(WAIT) == 0 and one.wait(WAIT) == 0
    assert (tmp_path / "a.log").read_text().strip() == "0,1"
    assert (tmp_path / "b.log").read_text().strip() == "2"
    assert (tmp_path / "cpu.log").read_text().strip() == "''"  # GPUs hidden from CPU jobs
    assert ex.capacity(3) == 1


def test_concurrency_limit(tmp_path: Path) -> None:
    ex = LocalExecutor(max_parallel=1)
    go = tmp_path / "go"
    job = ex.submit(py(f"import os,time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)"),
                    {}, tmp_path, tmp_path / "log")
    assert ex.capacity() == 0
    go.touch()
    assert job.wait(WAIT) == 0
    assert ex.capacity() == 1


def test_cancel_kills_the_whole_tree(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # The job starts a grandchild that sleeps; both must die on cancel.
    job_code = f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])
        with open({str(pids)!r} + '.tmp', 'w') as fh:
            fh.write(f'{{os.getpid()}} {{child.pid}}')
        os.replace({str(pids)!r} + '.tmp', {str(pids)!r})
        time.sleep(600)
    """
    ex = LocalExecutor(grace_period=5.0)
    job = ex.submit(py(job_code), {}, tmp_path, tmp_path / "log")
    wait_for(pids)
    parent, grandchild = (int(p) for p in pids.read_text().split())
    assert job.poll() is None
    job.cancel()
    assert job.poll() == -signal.SIGTERM
    assert not pid_alive(parent)
    # The grandchild is an orphan now; give init a moment to reap it if SIGTERM landed.
    subprocess.run([PY, "-c", f"import os,time\nfor _ in range(500):\n"
                    f"  if not os.path.exists('/proc/{grandchild}'): break\n  time.sleep(0.02)"],
                   timeout=WAIT, check=False)
    assert not pid_alive(grandchild)
    job.cancel()  # idempotent
    assert ex.capacity() == ex.max_parallel


def test_cancel_escalates_to_sigkill(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = f"""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open({str(ready)!r}, 'w').close()
        time.sleep(600)
    """
    job = LocalExecutor(grace_period=0.5).submit(py(code), {}, tmp_path, tmp_path / "log")
    wait_for(ready)
    job.cancel()
    assert job.poll() == -signal.SIGKILL


SUBMITTER = """
import sys, json
from pathlib import Path
from orchestrator.executors.local import LocalExecutor
tmp = Path(sys.argv[1])
job = LocalExecutor().submit(
    (sys.executable, '-c',
     'import os,sys,time\\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)\\n'
     'print("done"); sys.exit(5)', str(tmp / 'go')),
    {}, tmp, tmp / 'train.log')
print(job.job_id, flush=True)
import time; time.sleep(600)
"""


def _submit_from_another_process(tmp_path: Path) -> str:
    """Submit a job from a process that is then SIGKILLed; return the job id it printed."""
    proc = subprocess.Popen([PY, "-c", SUBMITTER, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True, cwd=Path(__file__).parents[3])
    assert proc.stdout is not None
    job_id = proc.stdout.readline().strip()
    proc.send_signal(signal.SIGKILL)
    proc.wait(WAIT)
    assert job_id.startswith("local:")
    return job_id


def test_reattach_after_the_submitter_was_killed(tmp_path: Path) -> None:
    job_id = _submit_from_another_process(tmp_path)
    ex = LocalExecutor(max_parallel=2)
    job = ex.reattach(job_id)
    assert job is not None
    assert job.poll() is None
    assert ex.capacity() == 1  # the reattached job holds a slot
    (tmp_path / "go").touch()
    assert job.wait(WAIT) == 5
    assert "done" in (tmp_path / "train.log").read_text()
    again = LocalExecutor().reattach(job_id)  # finished jobs stay reattachable
    assert again is not None and again.poll() == 5


def test_reattach_cancel_from_another_process(tmp_path: Path) -> None:
    job_id = _submit_from_another_process(tmp_path)
    job = LocalExecutor(grace_period=5.0).reattach(job_id)
    assert job is not None
    job.cancel()
    assert job.poll() == -signal.SIGTERM
    assert LocalExecutor().reattach(job_id) is not None


def test_vanished_and_reused_pids_are_not_running(tmp_path: Path) -> None:
    job_id = _submit_from_another_process(tmp_path)
    job_dir = Path(job_id.removeprefix("local:"))
    record = json.loads((job_dir / "pid.json").read_text())
    # Pretend the pid now belongs to a different process (start time differs).
    forged = dict(record, start_ticks=record["start_ticks"] + 1)
    (job_dir / "pid.json").write_text(json.dumps(forged))
    assert LocalExecutor().reattach(job_id) is None
    (job_dir / "pid.json").write_text(json.dumps(record))
    # Kill the whole job with SIGKILL so no exit code is recorded: it vanished.
    os.killpg(record["pid"], signal.SIGKILL)
    subprocess.run([PY, "-c", f"import os,time\nwhile os.path.exists('/proc/{record['pid']}') "
                    f"and open('/proc/{record['pid']}/stat').read().rsplit(')',1)[1].split()[0]"
                    f" not in 'ZX': time.sleep(0.02)"], timeout=WAIT, check=False)
    assert LocalExecutor().reattach(job_id) is None
    assert LocalExecutor().reattach("ray:whatever") is None


def test_detect_gpus_and_thread_division() -> None:
    assert detect_gpus([0, 3]) == ("0", "3")
    assert detect_gpus(None, {"CUDA_VISIBLE_DEVICES": "1, 2"}) == ("1", "2")
    assert detect_gpus(None, {"CUDA_VISIBLE_DEVICES": ""}) == ()
    assert cpu_threads_per_job(2, cpu_count=2) == 1
    assert cpu_threads_per_job(3, cpu_count=16) == 5
    assert cpu_threads_per_job(64, cpu_count=8) == 1


def test_unknown_executor_lists_known_ones() -> None:
    with pytest.raises(UserInputError, match="local"):
        get_executor("slurmm")
    assert isinstance(get_executor("local", max_parallel=3), LocalExecutor)
