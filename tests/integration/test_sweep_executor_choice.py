"""``kappa submit/resume/cancel --executor``: real ``kappa`` processes with the fake test
backend; the slow test runs a sweep's cells as jobs on a real local Ray head."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kit.cli import process
from kit.fake_backend import write_spec
from kit.home import use_home
from kit.wait import wait_until

from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.executor_choice import ExecutorChoice, remembered_executor

RAY_SAFETY = 600  # seconds; a guard against hangs (a Ray job starts slowly on 2 cores)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return use_home(tmp_path / "home", monkeypatch, cli=True)


def test_ray_jobs_without_an_address_exits_2_and_writes_nothing(
        home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "no-address", seeds=1, steps=1)
    before = sorted(p.name for p in home.iterdir())
    for wait in ((), ("--wait",)):
        proc = process("submit", str(spec), "--executor", "ray_jobs", *wait, code=None)
        assert proc.returncode == 2, proc.stderr
        assert "--ray-address" in proc.stderr and "RAY_ADDRESS" in proc.stderr
    proc = process("submit", str(spec), "--executor", "nope", code=None)
    assert proc.returncode == 2 and "local, ray_jobs" in proc.stderr
    assert sorted(p.name for p in home.iterdir()) == before  # no registry, no runs

    process("submit", str(spec), "--wait")  # local by default; then remembered
    assert remembered_executor("no-address") == ExecutorChoice("local", {})
    proc = process("resume", "no-address", "--executor", "ray_jobs", code=None)
    assert proc.returncode == 2 and "--ray-address" in proc.stderr


@pytest.mark.slow
@pytest.mark.ray
def test_a_sweep_on_ray_jobs_runs_in_the_background_and_cancels_through_ray(
        home: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from ray.job_submission import JobSubmissionClient
    from ray_head import local_ray_head

    with local_ray_head() as address:
        spec = write_spec(tmp_path / "s.yaml", "on-ray", seeds=2, steps=2, hold_at=2)
        # No --wait: the background scheduler must be told the executor too.
        out = process("submit", str(spec), "--executor", "ray_jobs", "--ray-address",
                    address).stdout
        assert "background" in out
        assert remembered_executor("on-ray") == ExecutorChoice("ray_jobs", {"address": address})

        def both_parked() -> bool:
            with Registry.open() as reg:
                return all(c.progress_step == 1 for c in reg.cells("on-ray"))

        wait_until(both_parked, "both cells at step 1 on Ray", timeout=RAY_SAFETY)
        with Registry.open() as reg:
            first, second = reg.cells("on-ray")
        assert first.job_id and first.job_id.startswith("ray-jobs:")
        assert second.job_id and second.job_id.startswith("ray-jobs:")
        client = JobSubmissionClient(address)
        submission = first.job_id.removeprefix("ray-jobs:")
        assert str(client.get_job_status(submission)) in ("RUNNING", "JobStatus.RUNNING")

        # cancel finds the executor from the job id and the address from the sweep.
        assert "cancelled 1 cell" in process("cancel", first.cell_id).stdout
        wait_until(lambda: "STOPPED" in str(client.get_job_status(submission)),
                   "Ray to stop the cancelled job", timeout=RAY_SAFETY)
        (home / "runs" / "on-ray" / second.cell_id / "go").touch()

        def sweep_over() -> bool:
            with Registry.open() as reg:
                counts = reg.counts("on-ray")
            return counts[CellState.CANCELLED] == 1 and counts[CellState.SUCCEEDED] == 1

        wait_until(sweep_over, "the background scheduler to finish on Ray", timeout=RAY_SAFETY)
        log = home / "runs" / "on-ray" / second.cell_id / "train.log"
        assert "fake trainer: done" in log.read_text()  # Ray's log, synced to the run folder
        assert os.environ.get("RAY_ADDRESS") is None
