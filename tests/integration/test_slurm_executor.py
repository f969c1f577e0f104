"""The SLURM executor against a real SLURM (the local one-node cluster, slurm_cluster.py).

Jobs are submitted together and waited for together, so the module costs a few seconds
of SLURM's scheduling, not a few per test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import LocalSlurm, slurm_cluster_fixture  # noqa: F401 (fixture)

from orchestrator.executors import JobResources, executor_for_job
from orchestrator.executors.slurm import SlurmError, SlurmExecutor
from orchestrator.executors.slurm_script import batch_script

SAFETY = 120  # seconds; a guard against hangs, not a speed assertion


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + SAFETY
    while not path.exists():
        assert time.monotonic() < deadline, f"gave up waiting for {path}"
        time.sleep(0.05)


def test_exit_codes_environment_gpus_and_logs(
        slurm_cluster: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "somewhere:6379")  # the shell's cluster, not the job's
    executor = SlurmExecutor()
    cases = {
        "ok": ("sh", "-c", 'echo "out $KAPPA_X $(pwd) gpus=[${CUDA_VISIBLE_DEVICES-unset}] '
                           'ray=${RAY_ADDRESS-unset}"; '
                           'echo err >&2'),
        "three": ("sh", "-c", "exit 3"),
        "killed": ("sh", "-c", "kill -9 $$"),
        "gpu": ("sh", "-c", 'echo "gpus=[$CUDA_VISIBLE_DEVICES] omp=$OMP_NUM_THREADS"'),
    }
    jobs = {}
    for name, argv in cases.items():
        run = tmp_path / name
        run.mkdir()
        (run / "train.log").write_text("earlier attempt\n")
        resources = JobResources(gpus=1 if name == "gpu" else 0, cpus=2, hours=0.1)
        jobs[name] = executor.submit(argv, {"KAPPA_X": "x-value"}, run, run / "train.log",
                                     resources)
    assert executor.capacity() == executor.max_parallel - 4 or executor.capacity() >= 0
    codes = {name: job.wait(SAFETY) for name, job in jobs.items()}
    assert codes == {"ok": 0, "three": 3, "killed": -9, "gpu": 0}
    ok_log = (tmp_path / "ok" / "train.log").read_text()
    assert ok_log.startswith("earlier attempt\n")  # appended, never truncated
    assert f"out x-value {tmp_path / 'ok'} gpus=[] ray=unset" in ok_log and "err" in ok_log
    # SLURM handed the job one of the fake GPUs, and CUDA_VISIBLE_DEVICES says which.
    assert "gpus=[0] omp=2" in (tmp_path / "gpu" / "train.log").read_text()
    assert "ended FAILED (exit code 3)" in (tmp_path / "three" / "train.log").read_text()
    script = (jobs["ok"].job_dir / "job.sbatch").read_text()
    assert "--time=19" in script and "--no-requeue" in script  # 0.1 h * 1.5 + 10 min
    # A job that ended is still found, with its code, from its id alone.
    again = executor_for_job(jobs["three"].job_id)
    assert isinstance(again, SlurmExecutor)
    handle = again.reattach(jobs["three"].job_id)
    assert handle is not None and handle.poll() == 3


_REATTACH_AND_CANCEL = """
import json, sys
from orchestrator.executors import executor_for_job
job_id = sys.argv[1]
job = executor_for_job(job_id).reattach(job_id)
before = job.poll()
job.cancel()
print(json.dumps({"before": before, "after": job.poll()}))
"""


def test_reattach_from_a_new_process_and_cancel_kills_children(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    executor = SlurmExecutor()
    # The job starts a child of its own (as a trainer starts data workers) and waits.
    # (exec: the job's own process is the last sleep, so SIGTERM ends it as -15; a shell
    # that outlived its child's SIGTERM would report 143 instead, which is a code too.)
    argv = ("sh", "-c", "sleep 300 & echo $! > child.pid; exec sleep 301")
    job = executor.submit(argv, {}, tmp_path, tmp_path / "train.log", JobResources(cpus=1))
    _wait_for(tmp_path / "child.pid")
    child = int((tmp_path / "child.pid").read_text())
    assert job.poll() is None
    # Another process (an orchestrator started after this one died) reattaches and cancels.
    out = subprocess.run([sys.executable, "-c", _REATTACH_AND_CANCEL, job.job_id],
                         capture_output=True, text=True, timeout=SAFETY, check=True).stdout
    assert json.loads(out) == {"before": None, "after": -15}
    assert job.wait(SAFETY) == -15
    deadline = time.monotonic() + SAFETY
    while Path(f"/proc/{child}").exists():  # SLURM killed the whole job, child included
        assert time.monotonic() < deadline, "the job's child outlived scancel"
        time.sleep(0.1)
    assert "ended CANCELLED" in (tmp_path / "train.log").read_text()
    job.cancel()  # idempotent
    # The scheduler's crash window (job submitted, id never recorded): found by its log.
    assert executor.jobs_for_log(tmp_path / "train.log") == [job.job_id]
    (job.job_dir / "job.json").unlink()
    assert executor.jobs_for_log(tmp_path / "train.log") == [job.job_id]
    # A job SLURM never heard of, with no folder: vanished.
    assert executor.reattach(f"slurm:999999:{tmp_path / 'nothing'}") is None


def test_when_squeue_fails_no_job_ends(
        slurm_cluster: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = SlurmExecutor().submit(("true",), {}, tmp_path, tmp_path / "train.log",
                                 JobResources())
    assert job.wait(SAFETY) == 0
    # squeue cannot be run (a controller that does not answer takes 10 s to say so).
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm-here"))
    blind = SlurmExecutor()
    (job.job_dir / "end.json").unlink()  # so the answer must come from SLURM
    handle = blind.reattach(job.job_id)
    assert handle is not None and handle.poll() is None  # unknown, so not vanished
    monkeypatch.setenv("PATH", path)
    assert handle.wait(SAFETY) == 0  # the controller answers again


def test_preempted_job_ends_with_a_signal_and_is_not_requeued(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    executor = SlurmExecutor(partition=slurm_cluster.preemptible_partition)
    gpus = slurm_cluster.fake_gpus
    low = executor.submit(("sh", "-c", "touch started; exec sleep 300"), {}, tmp_path,
                          tmp_path / "train.log", JobResources(cpus=1, gpus=gpus))
    _wait_for(tmp_path / "started")
    # A job of the higher-priority partition needs every GPU: SLURM preempts ours.
    subprocess.run(["sbatch", "--parsable", f"--partition={slurm_cluster.urgent_partition}",
                    f"--gpus-per-node={gpus}", "--output=/dev/null", "--wrap=true"],
                   check=True, capture_output=True, timeout=SAFETY)
    assert low.wait(SAFETY) == -15
    assert low.state(fresh=True) == ("PREEMPTED", -15) or low.state()[0] == "PREEMPTED"
    assert "ended PREEMPTED" in (tmp_path / "train.log").read_text()
    time.sleep(1)
    assert low.state(fresh=True)[0] == "PREEMPTED"  # not requeued: kappa retries the cell


def test_what_slurm_can_never_run_is_refused_up_front(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    executor = SlurmExecutor()
    assert executor.fits(JobResources(cpus=slurm_cluster.cpus, gpus=2, hours=1.0)) is None
    too_many_cpus = executor.fits(JobResources(cpus=slurm_cluster.cpus + 1))
    assert too_many_cpus is not None and "not available" in too_many_cpus
    assert executor.fits(JobResources(gpus=slurm_cluster.fake_gpus + 1)) is not None
    assert executor.fits(JobResources(nodes=2, self_placing=True)) is not None  # one node
    wrong = SlurmExecutor(partition="no-such-partition")
    assert "partition" in (wrong.fits(JobResources()) or "")
    with pytest.raises(SlurmError, match="partition"):
        wrong.submit(("true",), {}, tmp_path, tmp_path / "train.log", JobResources())


@pytest.mark.slow
def test_time_limit_ends_as_timeout(slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    """SLURM's smallest limit is a minute, checked every 30 s: about 90 s of waiting."""
    executor = SlurmExecutor(time_factor=1.0, time_extra_minutes=0)
    job = executor.submit(("sleep", "600"), {"PYTHONUNBUFFERED": "1"}, tmp_path,
                          tmp_path / "train.log", JobResources(hours=1 / 60))
    assert "--time=1" in (job.job_dir / "job.sbatch").read_text()
    assert job.wait(300) == -15
    assert "ended TIMEOUT" in (tmp_path / "train.log").read_text()
    assert os.environ["SLURM_CONF"] == str(slurm_cluster.conf)


@pytest.mark.slow
@pytest.mark.ray
def test_multi_node_script_runs_the_cell_on_a_ray_head(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    """The multi-node (verl) batch script on the one node there is: sbatch's own
    ``--nodes=1`` overrides the script's ``--nodes=2``, so the Ray head starts (srun in the
    allocation), no worker, and the cell attaches to the head through RAY_ADDRESS."""
    pytest.importorskip("ray")
    executor = SlurmExecutor()
    log = tmp_path / "train.log"
    job_dir = tmp_path / ".jobs" / "train.log.0"
    job_dir.mkdir(parents=True)
    argv = (sys.executable, "-c", "import os, ray; ray.init(); "
            "print('kappa-ray', os.environ['RAY_ADDRESS'], len(ray.nodes()), flush=True)")
    job = executor.batch_job(argv, tmp_path, log, job_dir,
                             JobResources(nodes=2, cpus=2, self_placing=True))
    (job_dir / "job.sbatch").write_text(batch_script(job))
    slurm_id = subprocess.run(["sbatch", "--parsable", "--nodes=1", str(job_dir / "job.sbatch")],
                              capture_output=True, text=True, check=True,
                              timeout=SAFETY).stdout.strip()
    (job_dir / "job.json").write_text(json.dumps({"slurm_id": slurm_id, "log": str(log)}))
    handle = executor.reattach(f"slurm:{slurm_id}:{job_dir}")
    assert handle is not None
    assert handle.wait(400) == 0, log.read_text()
    text = log.read_text()
    assert "kappa: Ray head on" in text and "kappa-ray 127.0.0.1:" in text, text
