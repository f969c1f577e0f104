"""The executor contract (orchestrator/executors/base.py), checked the same way on every
executor: local processes, Ray Jobs on a local head, SLURM on a local one-node cluster
(executor_factories.py says how each is made and what it promises).

Submit, poll, logs appended to ``log_path``, the job's environment, exit codes (0,
non-zero, killed by a signal -> minus the signal), cancel stopping the job *and* what it
started (idempotent, and a no-op on a finished job), reattach from a new process after
the submitting one was SIGKILLed, the GPU environment, and capacity.

Jobs wait for files the test writes, never for time, so nothing here depends on the
machine's speed; ``SAFETY`` only bounds a hang.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from executor_factories import PARAMS, ExecutorFactory, factory_for
from kit.wait import wait_until

from orchestrator.executors import Executor, JobHandle, JobResources, executor_for_job
from orchestrator.runs.liveness import is_running

SAFETY = 300.0  # seconds; a guard against hangs (Ray and SLURM start jobs slowly)
PY = sys.executable


@pytest.fixture(scope="module", params=PARAMS)
def factory(request: pytest.FixtureRequest) -> Iterator[ExecutorFactory]:
    with factory_for(request.param) as made:
        yield made


def _script(code: str) -> tuple[str, ...]:
    return (PY, "-c", code)


def _wait_for_file(name: str) -> str:
    """Python code that blocks until ``name`` (in the job's cwd) exists."""
    return f"import os, time\nwhile not os.path.exists({name!r}): time.sleep(0.02)\n"


def _submit(executor: Executor, run: Path, argv: tuple[str, ...], gpus: int = 0,
            env: dict[str, str] | None = None) -> JobHandle:
    run.mkdir(parents=True, exist_ok=True)
    return executor.submit(argv, env or {}, run, run / "train.log", JobResources(gpus=gpus))


def _run_all(executor: Executor, jobs: dict[str, Callable[[], JobHandle]]) -> dict[str, int]:
    """Submit each job as capacity allows; every exit code."""
    pending = dict(jobs)
    running: dict[str, JobHandle] = {}
    codes: dict[str, int] = {}
    deadline = time.monotonic() + SAFETY
    while pending or running:
        assert time.monotonic() < deadline, f"jobs never ended: {sorted(running)}"
        while pending and executor.capacity(0) > 0:
            name, start = pending.popitem()
            running[name] = start()
        for name, job in list(running.items()):
            code = job.poll()
            if code is not None:
                codes[name] = code
                del running[name]
        time.sleep(0.05)
    return codes


def test_jobs_run_with_their_env_logs_and_exit_codes(factory: ExecutorFactory,
                                                    tmp_path: Path) -> None:
    executor = factory.make()
    report = ("import json, os, sys\n"
              "print(json.dumps({'x': os.environ.get('KAPPA_CONFORMANCE'), 'cwd': os.getcwd(),"
              " 'cuda': os.environ.get('CUDA_VISIBLE_DEVICES')}), flush=True)\n"
              "print('to stderr', file=sys.stderr, flush=True)\n")
    argvs = {"ok": _script(report), "three": _script("raise SystemExit(3)"),
             "killed": _script("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")}
    gpus = {name: 0 for name in argvs}
    if factory.gpus:
        argvs["gpu"], gpus["gpu"] = _script(report), 1
    for name in argvs:
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.log").write_text("an earlier attempt\n")

    def starter(name: str) -> Callable[[], JobHandle]:
        return lambda: _submit(executor, tmp_path / name, argvs[name], gpus[name],
                               {"KAPPA_CONFORMANCE": f"value of {name}"})

    codes = _run_all(executor, {name: starter(name) for name in argvs})
    assert codes == {**{n: 0 for n in argvs}, "three": 3, "killed": -int(signal.SIGKILL)}
    for name in ("ok", "gpu") if factory.gpus else ("ok",):
        log = (tmp_path / name / "train.log").read_text()
        assert log.startswith("an earlier attempt\n"), log  # appended, never truncated
        assert "to stderr" in log, log  # stderr goes to the log too
        seen = json.loads(next(line for line in log.splitlines() if line.startswith("{")))
        assert seen["x"] == f"value of {name}" and Path(seen["cwd"]) == tmp_path / name
        if name == "ok":  # no GPU asked: none visible, the way this executor promises
            assert seen["cuda"] in factory.cpu_job_devices, seen
        else:  # one GPU asked: exactly one device
            assert seen["cuda"] is not None and len(seen["cuda"].split(",")) == 1, seen


def test_poll_is_none_while_a_job_runs_and_cancel_of_an_ended_job_does_nothing(
        factory: ExecutorFactory, tmp_path: Path) -> None:
    executor = factory.make()
    job = _submit(executor, tmp_path / "run", _script(_wait_for_file("go") + "print('went')"))
    assert job.poll() is None  # blocked on "go" until we write it
    assert job.wait(0.1) is None  # a timed-out wait is None, not an exit code
    (tmp_path / "run" / "go").touch()
    assert job.wait(SAFETY) == 0
    job.cancel()
    job.cancel()
    assert job.poll() == 0 and "went" in (tmp_path / "run" / "train.log").read_text()


def test_cancel_stops_the_job_and_what_it_started(factory: ExecutorFactory,
                                                 tmp_path: Path) -> None:
    executor = factory.make()
    run = tmp_path / "run"
    # The job starts a grandchild (a process of its own, not a thread), records both pids
    # and waits forever; neither may outlive a cancel.
    code = ("import os, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time\\n"
            "while True: time.sleep(1)'])\n"
            "open('pids.tmp', 'w').write(f'{os.getpid()} {child.pid}')\n"
            "os.replace('pids.tmp', 'pids')\n"
            "while True: time.sleep(1)\n")
    job = _submit(executor, run, _script(code))
    wait_until(lambda: (run / "pids").exists(), "the job and its child to start", timeout=SAFETY)
    pids = [int(p) for p in (run / "pids").read_text().split()]
    assert all(is_running(pid, None) for pid in pids)
    job.cancel()
    job.cancel()  # idempotent
    wait_until(lambda: job.poll() is not None, "the cancelled job to end", timeout=SAFETY)
    assert job.poll() != 0
    wait_until(lambda: not any(is_running(pid, None) for pid in pids),
               f"the job's processes {pids} to end after cancel", timeout=SAFETY)
    job.cancel()  # still a no-op once it has ended


REATTACH_SUBMITTER = """
import json, sys, time
from pathlib import Path
from orchestrator.executors import JobResources, get_executor
name, options, run = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
job = get_executor(name, **options).submit(
    (sys.executable, "-c", sys.argv[4]), {"KAPPA_CONFORMANCE": "from the dead"}, run,
    run / "train.log", JobResources())
print(job.job_id, flush=True)
time.sleep(3600)  # until SIGKILLed
"""


def test_a_new_process_reattaches_after_the_submitter_was_sigkilled(
        factory: ExecutorFactory, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    job_code = (_wait_for_file("go") + "import os\n"
                "print('reattached', os.environ['KAPPA_CONFORMANCE'], flush=True)\n"
                "raise SystemExit(7)\n")
    submitter = subprocess.Popen(
        [PY, "-c", REATTACH_SUBMITTER, factory.name, json.dumps(factory.options), str(run),
         job_code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert submitter.stdout is not None
        job_id = submitter.stdout.readline().strip()
    finally:
        os.killpg(submitter.pid, signal.SIGKILL)  # the orchestrator dies, its jobs must not
        submitter.wait()
    assert job_id, "the submitter printed no job id"

    executor = executor_for_job(job_id, **factory.options)  # the prefix names the executor
    assert executor.name == factory.name
    job = executor.reattach(job_id)
    assert job is not None and job.job_id == job_id
    assert job.poll() is None  # still waiting for "go"
    (run / "go").touch()
    assert job.wait(SAFETY) == 7
    assert "reattached from the dead" in (run / "train.log").read_text()
    again = factory.make().reattach(job_id)  # an ended job can still be looked at
    assert again is None or again.poll() == 7
    assert factory.make().reattach(executor.job_id_prefix + "no-such-job-0") is None


def test_capacity_counts_running_jobs_and_impossible_gpu_counts(
        factory: ExecutorFactory, tmp_path: Path) -> None:
    executor = factory.make()
    assert executor.capacity(0) == factory.capacity
    most = executor.most_gpus()
    if most is not None:
        assert executor.capacity(most + 1) == 0
    jobs = [_submit(executor, tmp_path / f"run{n}", _script(_wait_for_file("go")))
            for n in range(factory.capacity)]
    assert executor.capacity(0) == 0
    for n in range(factory.capacity):
        (tmp_path / f"run{n}" / "go").touch()
    assert [job.wait(SAFETY) for job in jobs] == [0] * factory.capacity
    wait_until(lambda: executor.capacity(0) == factory.capacity,
               "the ended jobs' slots to be free again", timeout=SAFETY)
