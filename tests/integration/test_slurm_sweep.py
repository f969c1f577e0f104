"""A toy sweep on a real SLURM through ``kappa submit --executor slurm``.

The fake test backend (tests/kit/fake_backend.py: a small process that checkpoints every
step and can park before a step until ``<run_dir>/go`` exists) runs as SLURM batch jobs on
the local one-node cluster (slurm_cluster.py); the commands are real ``kappa`` processes
(tests/kit/kappa_main.py), the registry SQLite, MLflow a real store.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kit.cli import process
from kit.fake_backend import write_spec
from kit.home import completions, launches, use_home
from kit.kappa_main import KAPPA_SCRIPT
from kit.wait import wait_until
from slurm_cluster import LocalSlurm, slurm_cluster_fixture  # noqa: F401 (fixture)

from orchestrator.registry import CellState, Registry

SAFETY = 180  # seconds; a guard against hangs, not a speed assertion


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slurm_cluster: LocalSlurm) -> Path:
    return use_home(tmp_path / "home", monkeypatch, cli=True)


def running_cells(sweep: str, step: int) -> list[str]:
    """Ids of the cells running as SLURM jobs that reached ``step``."""
    try:
        with Registry.open() as reg:
            cells = reg.cells(sweep, [CellState.RUNNING])
    except Exception:  # the sweep is not recorded yet
        return []
    return [c.cell_id for c in cells
            if (c.job_id or "").startswith("slurm:") and c.progress_step == step]


def slurm_state(job_id: str) -> str:
    slurm_id = job_id.removeprefix("slurm:").split(":", 1)[0]
    return subprocess.run(["squeue", "--noheader", "--states=all", f"--jobs={slurm_id}",
                           "--format=%T"], capture_output=True, text=True, check=True,
                          timeout=SAFETY).stdout.strip()


def test_kill_the_orchestrator_cancel_a_cell_then_resume_reattaches_the_slurm_jobs(
        home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "on-slurm", seeds=3, steps=3, hold_at=2)
    # Each cell runs step 1 as a SLURM job, then parks before step 2 until <run>/go.
    orchestrator = subprocess.Popen(
        [sys.executable, str(KAPPA_SCRIPT), "submit", str(spec), "--executor", "slurm", "--wait",
         "--max-parallel", "3"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_until(lambda: len(running_cells("on-slurm", 1)) == 3, "three SLURM jobs at step 1")
    os.killpg(orchestrator.pid, signal.SIGKILL)  # the scheduler dies; SLURM's jobs do not
    orchestrator.wait(SAFETY)
    with Registry.open() as reg:
        parked = {c.cell_id: c.job_id or "" for c in reg.cells("on-slurm")}
    assert [slurm_state(job) for job in parked.values()] == ["RUNNING"] * 3
    # With no scheduler around, `kappa cancel` stops one cell's job itself (scancel).
    victim = sorted(parked)[0]
    assert "cancelled 1 cell" in process("cancel", victim).stdout
    assert slurm_state(parked[victim]) == "CANCELLED"
    for cell_id in parked:
        (home / "runs" / "on-slurm" / cell_id / "go").touch()

    # The executor comes from the registry; exit 1: not every cell succeeded.
    out = process("resume", "on-slurm", "--wait", code=1).stdout
    assert "2 succeeded · 1 cancelled" in out

    with Registry.open() as reg:
        cells = {c.cell_id: c for c in reg.cells("on-slurm")}
        attempts = {i: [a.state.value for a in reg.attempts(c)] for i, c in cells.items()}
    survivors = sorted(set(parked) - {victim})
    assert cells[victim].state is CellState.CANCELLED
    assert {cells[i].state for i in survivors} == {CellState.SUCCEEDED}
    # Reattached by job id: the same SLURM jobs finished, nothing ran twice.
    assert {i: cells[i].job_id for i in survivors} == {i: parked[i] for i in survivors}
    assert {i: attempts[i] for i in survivors} == {i: ["succeeded"] for i in survivors}
    assert sorted(completions(home)) == survivors
    for cell_id in parked:
        assert launches(home / "runs" / "on-slurm" / cell_id) == [0]
    assert [slurm_state(parked[i]) for i in survivors] == ["COMPLETED"] * 2


@pytest.mark.slow
def test_a_preempted_cell_is_retried_and_resumes_from_its_checkpoint(
        home: Path, tmp_path: Path, slurm_cluster: LocalSlurm) -> None:
    spec = write_spec(tmp_path / "s.yaml", "preempted", seeds=1, retries=1, steps=3,
                      hold_at=2)
    # The cell's job holds every (fake) GPU in the partition whose jobs can be preempted.
    gpus = slurm_cluster.fake_gpus
    orchestrator = subprocess.Popen(
        [sys.executable, str(KAPPA_SCRIPT), "submit", str(spec), "--executor", "slurm", "--wait",
         "-E", f"partition={slurm_cluster.preemptible_partition}",
         "-E", f"sbatch_args=--gres=gpu:{gpus}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: len(running_cells("preempted", 1)) == 1, "the job at step 1")
        with Registry.open() as reg:
            (cell,) = reg.cells("preempted")
        # A higher-priority job wants every GPU: SLURM preempts the cell's job.
        subprocess.run(["sbatch", f"--partition={slurm_cluster.urgent_partition}",
                        f"--gpus-per-node={gpus}", "--output=/dev/null", "--wrap=sleep 1"],
                       check=True, capture_output=True, timeout=SAFETY)
        wait_until(lambda: slurm_state(cell.job_id or "") == "PREEMPTED", "the preemption")
        (home / "runs" / "preempted" / cell.cell_id / "go").touch()
        assert orchestrator.wait(SAFETY) == 0
    finally:
        if orchestrator.poll() is None:
            os.killpg(orchestrator.pid, signal.SIGKILL)
    with Registry.open() as reg:
        (cell,) = reg.cells("preempted")
        attempts = reg.attempts(cell)
    assert cell.state is CellState.SUCCEEDED
    assert [a.state.value for a in attempts] == ["failed", "succeeded"]  # retries count it
    assert attempts[0].exit_code == -15 and attempts[0].job_id != attempts[1].job_id
    run = home / "runs" / "preempted" / cell.cell_id
    assert "ended PREEMPTED" in (run / "train.log").read_text()
    # The retry was a new SLURM job that resumed from the step-1 checkpoint.
    assert launches(run) == [0, 1]
