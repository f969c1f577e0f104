"""``kappa submit --executor slurm`` killed at the worst moment, on the real local SLURM:
no cell runs twice, none is lost.

The worst moments are around ``sbatch``: just after SLURM took the job but before the
submitter recorded its id (in the job folder or the registry), and just before sbatch
ran at all. A wrapper ``sbatch`` first on PATH (it runs the real one) holds the k-th
submission (k drawn from the seed) at that moment; the test then SIGKILLs the submitter
and its process group, and ``kappa resume`` must find the job SLURM already has (from
the folder, the job's own ``slurm_id`` file or SLURM's comment) rather than submit a
second, and must rerun a cell whose job never reached SLURM. Seeds are printed;
``KAPPA_TEST_SEED`` replays one. The default run tries one seed; ``slow`` tries more.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kit.cli import process
from kit.fake_backend import write_spec
from kit.home import launches, use_home
from kit.kappa_main import KAPPA_SCRIPT
from kit.wait import wait_until
from slurm_cluster import LocalSlurm, slurm_cluster_fixture  # noqa: F401 (fixture)
from test_slurm_sweep import SAFETY, running_cells, slurm_state

from orchestrator.registry import CellState, Registry

WRAPPER = """#!/bin/bash
# Counts real submissions (not --test-only) and holds the one numbered $HANG_AT.
real={real}
case " $* " in *" --test-only "*) exec "$real" "$@";; esac
n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo "$n" > {count}
if [ "$n" = "$HANG_AT" ] && [ "$HANG_WHEN" = before ]; then touch {held}; sleep 1000; fi
"$real" "$@"; rc=$?
if [ "$n" = "$HANG_AT" ]; then touch {held}; sleep 1000; fi
exit $rc
"""


def _kill_at_submit(home: Path, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    cells = rng.randint(2, 3)
    hang_at, when = rng.randint(1, cells), rng.choice(["after", "before"])
    print(f"seed={seed} (replay: KAPPA_TEST_SEED={seed}): {cells} cells, hold sbatch "
          f"#{hang_at} {when} it submits")
    real = shutil.which("sbatch")
    assert real is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    held = tmp_path / "held"
    (bin_dir / "sbatch").write_text(WRAPPER.format(real=real, count=tmp_path / "count",
                                                   held=held))
    (bin_dir / "sbatch").chmod(0o755)
    sweep = f"kill-submit-{seed % 10000}"
    spec = write_spec(tmp_path / "s.yaml", sweep, seeds=cells, steps=1)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "HANG_AT": str(hang_at), "HANG_WHEN": when}
    submitter = subprocess.Popen(
        [sys.executable, str(KAPPA_SCRIPT), "submit", str(spec), "--executor", "slurm", "--wait",
         "--max-parallel", "1"], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(held.exists, f"sbatch #{hang_at} held")
    finally:
        os.killpg(submitter.pid, signal.SIGKILL)
        submitter.wait(SAFETY)

    process("resume", sweep, "--wait")  # the real sbatch: nothing is held now
    with Registry.open() as reg:
        states = {c.cell_id: c.state for c in reg.cells(sweep)}
    assert set(states.values()) == {CellState.SUCCEEDED}, states
    # No cell ran twice: each trainer started once, from step 0.
    for cell_id in states:
        assert launches(home / "runs" / sweep / cell_id) == [0], cell_id
    # And SLURM got one job per cell, never a second for a job it already had.
    listing = subprocess.run(
        ["squeue", "--noheader", "--states=all", "--format=%k"], capture_output=True,
        text=True, check=True, timeout=SAFETY).stdout.split()
    ours = [c for c in listing if c.startswith(f"kappa:{home / 'runs' / sweep}/")]
    assert len(ours) == len(states), ours


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slurm_cluster: LocalSlurm) -> Path:
    return use_home(tmp_path / "home", monkeypatch, cli=True)


def test_submit_killed_around_sbatch_runs_no_cell_twice(home: Path, tmp_path: Path) -> None:
    seed = int(os.environ.get("KAPPA_TEST_SEED", random.randrange(2**32)))
    _kill_at_submit(home, tmp_path, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_submit_killed_around_sbatch_matrix(home: Path, tmp_path: Path, seed: int) -> None:
    _kill_at_submit(home, tmp_path, seed)


def _cancel_killing_the_scheduler(home: Path, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    delay = rng.uniform(0.0, 3.0)
    print(f"seed={seed} (replay: KAPPA_TEST_SEED={seed}): SIGKILL the scheduler "
          f"{delay:.2f} s into `kappa cancel`")
    sweep = f"kill-cancel-{seed % 10000}"
    spec = write_spec(tmp_path / "s.yaml", sweep, seeds=2, steps=3, hold_at=2)
    scheduler = subprocess.Popen(
        [sys.executable, str(KAPPA_SCRIPT), "submit", str(spec), "--executor", "slurm", "--wait"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: len(running_cells(sweep, 1)) == 2, "two SLURM jobs at step 1")
        with Registry.open() as reg:
            jobs = [c.job_id or "" for c in reg.cells(sweep)]
        canceller = subprocess.Popen([sys.executable, str(KAPPA_SCRIPT), "cancel", sweep],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)  # a seeded moment, not a timing assertion
    finally:
        os.killpg(scheduler.pid, signal.SIGKILL)
        scheduler.wait(SAFETY)
    canceller.wait(SAFETY)
    process("resume", sweep, "--wait", code=1)  # cancelled cells: not all succeeded
    with Registry.open() as reg:
        states = {c.cell_id: c.state for c in reg.cells(sweep)}
    assert set(states.values()) == {CellState.CANCELLED}, states
    # No job of the sweep is left running in SLURM, and no cell ran a second time.
    wait_until(lambda: all(slurm_state(j) in ("CANCELLED", "COMPLETED", "") for j in jobs),
               "the cancelled jobs to end")
    for cell_id in states:
        assert launches(home / "runs" / sweep / cell_id) == [0], cell_id


@pytest.mark.slow  # ~50 s a seed on a loaded machine
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_scheduler_killed_while_cancelling_leaves_no_job_running(
        home: Path, tmp_path: Path, seed: int) -> None:
    _cancel_killing_the_scheduler(home, tmp_path,
                                  int(os.environ.get("KAPPA_TEST_SEED", seed)))


@pytest.mark.slow
def test_four_submits_of_different_specs_at_once(home: Path, tmp_path: Path) -> None:
    procs = []
    for i in range(4):
        spec = write_spec(tmp_path / f"s{i}.yaml", f"together-{i}", seeds=3, steps=2)
        procs.append(subprocess.Popen(
            [sys.executable, str(KAPPA_SCRIPT), "submit", str(spec), "--executor", "slurm",
             "--wait", "-E", "max_parallel=2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True))
    for proc in procs:
        out, err = proc.communicate(timeout=SAFETY * 2)
        assert proc.returncode == 0, f"{out}\n{err}"
    with Registry.open() as reg:
        for i in range(4):
            cells = reg.cells(f"together-{i}")
            assert [c.state for c in cells] == [CellState.SUCCEEDED] * 3
            for cell in cells:
                assert launches(home / "runs" / f"together-{i}" / cell.cell_id) == [0]


TIMES_OUT = """#!/bin/bash
# sbatch that fails mid-request as a busy controller makes it: after submitting (or not).
case " $* " in *" --test-only "*) exec {real} "$@";; esac
[ "$SUBMIT" = yes ] && {real} "$@" >/dev/null
echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2
exit 1
"""


@pytest.mark.parametrize("submitted", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_an_sbatch_that_times_out_midway_is_not_submitted_twice(
        slurm_cluster: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        submitted: bool) -> None:
    from orchestrator.executors.base import JobResources
    from orchestrator.executors.slurm import SlurmExecutor
    from orchestrator.executors.slurm_queue import SlurmUnreachable

    real = shutil.which("sbatch")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(TIMES_OUT.format(real=real))
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SUBMIT", "yes" if submitted else "no")
    executor = SlurmExecutor(partition=slurm_cluster.partition)
    run = tmp_path / "run"
    if not submitted:  # nothing reached SLURM: unreachable (not the cell's fault), no job
        with pytest.raises(SlurmUnreachable, match="holds no job"):
            executor.submit(("true",), {}, run, run / "train.log", JobResources(cpus=1))
        return
    # The job SLURM took in spite of the error is the one followed; no second is made.
    job = executor.submit(("bash", "-c", "echo ran >> ../ran"), {}, run, run / "train.log",
                          JobResources(cpus=1))
    assert job.wait(SAFETY) == 0
    assert (tmp_path / "ran").read_text() == "ran\n"
    listing = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%k"],
                             capture_output=True, text=True, check=True,
                             timeout=SAFETY).stdout.split()
    assert sum(c.startswith(f"kappa:{run}/") for c in listing) == 1
