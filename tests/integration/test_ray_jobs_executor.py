"""RayJobsExecutor against a real local Ray cluster (head + dashboard), CPU only."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

from ray_head import local_ray_head

from orchestrator.executors.ray_jobs import (
    STOPPED_EXIT_CODE,
    RayJobsError,
    RayJobsExecutor,
)

pytestmark = [pytest.mark.slow, pytest.mark.ray]


@pytest.fixture(scope="module")
def executor() -> Iterator[RayJobsExecutor]:
    with local_ray_head() as address:
        yield RayJobsExecutor(address, max_parallel=4)


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


def test_cancel_reattach_and_resubmit(executor: RayJobsExecutor, tmp_path: Path) -> None:
    marker = tmp_path / "runs.txt"
    code = (f"open({str(marker)!r}, 'a').write('run\\n'); import time; "
            "print('started', flush=True); time.sleep(600)")
    job = executor.submit(_py(code), {}, tmp_path, tmp_path / "c.log")
    assert job.wait(timeout=5) is None  # a long job is still running
    again = executor.reattach(job.job_id)
    assert again is not None and again.log_path == tmp_path / "c.log"
    again.cancel()
    assert again.wait(timeout=300) == STOPPED_EXIT_CODE
    again.cancel()  # idempotent
    resumed = executor.resubmit(job.job_id)
    assert resumed.submission_id.endswith("-retry1")
    assert resumed.wait(timeout=20) is None
    resumed.cancel()
    assert resumed.wait(timeout=300) == STOPPED_EXIT_CODE
    assert marker.read_text().count("run") == 2  # the same entrypoint ran twice


def test_unknown_job_and_capacity(executor: RayJobsExecutor) -> None:
    assert executor.reattach("ray-jobs:kappa-no-such-job") is None
    with pytest.raises(RayJobsError):
        executor.resubmit("ray-jobs:kappa-no-such-job")
    assert executor.capacity() == 4
