"""RayJobsExecutor against a real local Ray cluster (head + dashboard), CPU only.

The executor is made the way the scheduler makes executors: ``get_executor("ray_jobs",
address=...)``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

from ray_head import local_ray_head

from orchestrator.backends import get_backend
from orchestrator.backends.verl.command import ENV_PREFIX, phases, verl_command
from orchestrator.backends.verl.settings import VerlSettings
from orchestrator.executors import get_executor
from orchestrator.executors.ray_client import STOPPED_EXIT_CODE
from orchestrator.executors.ray_jobs import RayJobsExecutor

pytestmark = [pytest.mark.slow, pytest.mark.ray]


@pytest.fixture(scope="module")
def executor() -> Iterator[RayJobsExecutor]:
    with local_ray_head() as address:
        made = get_executor("ray_jobs", address=address, max_parallel=4)
        assert isinstance(made, RayJobsExecutor)
        yield made


def _py(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def test_success_env_cwd_and_logs(executor: RayJobsExecutor, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///forwarded.db")
    log = tmp_path / "job.log"
    code = ("import os; print('cwd', os.getcwd()); print('mine', os.environ['MINE']); "
            "print('mlflow', os.environ['MLFLOW_TRACKING_URI']); "
            "print('plugin', os.environ['VERL_USE_EXTERNAL_MODULES'])")
    job = executor.submit(_py(code), {"MINE": "it's quoted"}, tmp_path, log)
    assert job.wait(timeout=300) == 0
    text = log.read_text()
    assert f"cwd {tmp_path}" in text
    assert "mine it's quoted" in text
    assert "mlflow sqlite:///forwarded.db" in text
    assert "plugin kappa_verl" in text
    job.sync_logs()  # nothing new: no duplicated lines
    assert log.read_text().count("mine it's quoted") == 1


def test_failure_exit_code(executor: RayJobsExecutor, tmp_path: Path) -> None:
    job = executor.submit(_py("import sys; sys.exit(3)"), {}, tmp_path, tmp_path / "f.log")
    assert job.wait(timeout=300) == 3


def test_cancel_and_reattach(executor: RayJobsExecutor, tmp_path: Path) -> None:
    marker = tmp_path / "runs.txt"
    code = (f"open({str(marker)!r}, 'a').write('run\\n'); import time; "
            "print('started', flush=True); time.sleep(600)")
    job = executor.submit(_py(code), {}, tmp_path, tmp_path / "c.log")
    _wait_for_runs(marker, 1)  # started (a loaded machine may take a while)
    assert job.wait(timeout=1) is None  # a long job is still running
    again = executor.reattach(job.job_id)
    assert again is not None and again.log_path == tmp_path / "c.log"
    again.cancel()
    assert again.wait(timeout=300) == STOPPED_EXIT_CODE
    again.cancel()  # idempotent


def _wait_for_runs(marker: Path, count: int) -> None:
    deadline = time.monotonic() + 300
    while not (marker.exists() and marker.read_text().count("run") >= count):
        assert time.monotonic() < deadline, f"the job did not start {count} time(s)"
        time.sleep(0.2)


def test_unknown_job_and_capacity(executor: RayJobsExecutor) -> None:
    assert executor.reattach("ray-jobs:kappa-no-such-job") is None
    assert executor.capacity() == 4


# What verl's main_ppo does with kappa's overrides: ray.init(runtime_env) with the
# `+ray_kwargs.ray_init.runtime_env.env_vars.*` of the phase's command, inside the job.
PHASE_PROBE = """
import json, os, sys, ray
ray.init(runtime_env={"env_vars": json.loads(sys.argv[1])})

@ray.remote(num_cpus=0)
def worker_env():
    return [os.environ.get(k) for k in ("KAPPA_ENTROPY_REWARD_COEF",
                                        "KAPPA_ENTROPY_REWARD_STEPS")]

print("WORKER_ENV", json.dumps(ray.get(worker_env.remote())), flush=True)
"""


def _ray_init_env(argv: list[str]) -> dict[str, str]:
    pairs = (a.split("=", 1) for a in argv[3:])
    return {k.removeprefix(ENV_PREFIX): v for k, v in pairs if k.startswith(ENV_PREFIX)}


def test_entropy_reward_switch_reaches_ray_workers_per_phase(executor: RayJobsExecutor,
                                                            tmp_path: Path) -> None:
    """The job's runtime_env carries the cell's switch; each phase's ray.init overrides it.

    The control shows why the executor sets RAY_OVERRIDE_JOB_RUNTIME_ENV=1: without it
    Ray refuses a ray.init that repeats a key of the job's runtime_env, i.e. every verl
    launch through Ray Jobs.
    """
    settings = VerlSettings(model_path="m", train_files="/t", val_files="/v",
                            entropy_intervention="entropy_reward", entropy_coef=0.01,
                            intervention_steps=5, max_steps=10)
    run_dir = tmp_path / "sweep" / "cell"
    backend = get_backend("verl")
    spec = backend.launch(settings.model_dump(mode="json", exclude_unset=True), run_dir,
                          backend.demand(settings))
    probe = tmp_path / "probe.py"
    probe.write_text(PHASE_PROBE)
    seen = []
    for phase in phases(settings):
        env = json.dumps(_ray_init_env(verl_command(settings, run_dir, phase=phase)))
        log = tmp_path / f"{phase.name}.log"
        job = executor.submit((sys.executable, str(probe), env), spec.env, tmp_path, log)
        assert job.wait(timeout=300) == 0, log.read_text()[-3000:]
        [line] = [x for x in log.read_text().splitlines() if x.startswith("WORKER_ENV")]
        seen.append(json.loads(line.split(" ", 1)[1]))
    assert seen == [["0.01", "5"], ["0", "0"]]

    first = json.dumps(_ray_init_env(verl_command(settings, run_dir, phase=phases(settings)[0])))
    log = tmp_path / "control.log"
    job = executor.submit((sys.executable, str(probe), first),
                          {**spec.env, "RAY_OVERRIDE_JOB_RUNTIME_ENV": "0"}, tmp_path, log)
    assert job.wait(timeout=300) != 0
    assert "Failed to merge the Job's runtime env" in log.read_text()
