"""Cells go where their resources are, on a real local multi-node Ray cluster.

A head with no CPUs (drivers only) and two worker nodes of 2 CPUs each, started with
custom resources ``node_a`` and ``node_b``, all on 127.0.0.1. An embedded-like sweep's
cells reserve one CPU each for their entrypoint, so Ray spreads them over both workers
and never runs more on a node than it has CPUs; custom entrypoint resources keep them on
one kind of node; a cell no node could ever hold is refused by ``kappa submit`` (exit 2,
nothing written). Slow: three Ray nodes take ~30-90 s to start on a loaded 2-core box.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

from kit.cli import process
from kit.fake_backend import intervals
from kit.home import use_home
from ray_head import WorkerNode, local_ray_cluster

from orchestrator.executors import get_executor
from orchestrator.executors.ray_jobs import RayJobsExecutor
from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.driver import submit

pytestmark = [pytest.mark.slow, pytest.mark.ray]

WORKER_CPUS = 2


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    workers = [WorkerNode(WORKER_CPUS, {"node_a": 1}), WorkerNode(WORKER_CPUS, {"node_b": 1})]
    with local_ray_cluster(head_cpus=0, workers=workers) as address:
        yield address


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return use_home(tmp_path / "home", monkeypatch, cli=True)


def _spec(path: Path, name: str, cells: int, **base: object) -> Path:
    settings = {"steps": 2, "step_seconds": 1.0, "record_intervals": True, **base}
    lines = "".join(f"  {k}: {json.dumps(v)}\n" for k, v in settings.items())
    path.write_text(f"name: {name}\nbackend: fake\nbase:\n{lines}"
                    f"axes:\n  seed: {list(range(cells))}\n")
    return path


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of ``spans`` that overlap at any moment."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = most = 0
    for _, step in events:  # an end sorts before a start at the same instant
        now += step
        most = max(most, now)
    return most


def _nodes_of_cells(executor: RayJobsExecutor, sweep: str) -> dict[str, tuple[str, Path]]:
    """Each cell's (Ray node its job's driver ran on, run folder)."""
    placed = {}
    with Registry.open() as reg:
        cells = reg.cells(sweep)
    for cell in cells:
        assert cell.state == CellState.SUCCEEDED, (cell.cell_id, cell.state, cell.last_error)
        assert cell.job_id and cell.run_dir
        info = executor._client.get_job_info(cell.job_id.removeprefix("ray-jobs:"))
        placed[cell.cell_id] = (str(info.driver_node_id), Path(cell.run_dir))
    return placed


def _executor(address: str, **options: object) -> RayJobsExecutor:
    made = get_executor("ray_jobs", address=address, max_parallel=8, **options)
    assert isinstance(made, RayJobsExecutor)
    return made


def test_an_embedded_sweep_spreads_over_the_workers(cluster: str, home: Path,
                                                    tmp_path: Path) -> None:
    executor = _executor(cluster)
    workers = {n.node_id: n for n in executor.nodes() if not n.is_head}
    assert len(workers) == 2
    spec = _spec(tmp_path / "s.yaml", "spread", cells=6)
    submit(spec, wait=True, executor=executor)

    placed = _nodes_of_cells(executor, "spread")
    used = {node for node, _ in placed.values()}
    print("cells per node:", {n[:8]: sum(1 for m, _ in placed.values() if m == n)
                              for n in used})
    assert used <= set(workers), "a cell ran on the head, which has no CPUs"
    for _, run_dir in placed.values():  # Ray's log of a job run on a worker, synced here
        assert "fake trainer: done" in (run_dir / "train.log").read_text()
    assert len(used) == 2, "the sweep did not spread over both workers"
    for node in used:
        spans = [span for n, run_dir in placed.values() if n == node
                 for span in intervals(run_dir)]
        assert len(spans) == sum(1 for n, _ in placed.values() if n == node)
        print(f"node {node[:8]}: at most {most_at_once(spans)} cells at once")
        assert most_at_once(spans) <= workers[node].cpus


def test_custom_entrypoint_resources_keep_cells_on_one_kind_of_node(
        cluster: str, home: Path, tmp_path: Path) -> None:
    """Through the CLI: ``-E entrypoint_resources=...`` reaches the executor."""
    spec = _spec(tmp_path / "s.yaml", "on-b", cells=3)
    process("submit", str(spec), "--executor", "ray_jobs", "--ray-address", cluster,
            "-E", 'entrypoint_resources={"node_b": 0.01}', "--wait")
    executor = _executor(cluster)
    [node_b] = [n.node_id for n in executor.nodes() if "node_b" in n.resources]
    assert {node for node, _ in _nodes_of_cells(executor, "on-b").values()} == {node_b}


def test_a_job_reserves_its_entrypoint_resources(cluster: str, tmp_path: Path) -> None:
    executor = _executor(cluster, entrypoint_resources={"node_b": 0.01})
    [node_b] = [n.node_id for n in executor.nodes() if "node_b" in n.resources]
    job = executor.submit((sys.executable, "-c", "print('ran')"), {}, tmp_path,
                          tmp_path / "first.log")
    assert job.wait(timeout=300) == 0
    assert executor._client.get_job_info(job.submission_id).driver_node_id == node_b


def test_secrets_stay_out_of_the_runtime_env_the_dashboard_shows(
        cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = "postgresql://kappa:s3cret@db.invalid:5432/mlflow"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # forwarded like every MLFLOW_* variable
    executor = _executor(cluster)
    code = ("import os; print('uri', os.environ['MLFLOW_TRACKING_URI']); "
            "print('token', os.environ['MLFLOW_TRACKING_TOKEN'])")
    job = executor.submit((sys.executable, "-c", code), {"MLFLOW_TRACKING_TOKEN": "t0k3n"},
                          tmp_path, tmp_path / "job.log")
    assert job.wait(timeout=300) == 0, (tmp_path / "job.log").read_text()
    assert f"uri {uri}" in (tmp_path / "job.log").read_text()  # the job has them
    assert "token t0k3n" in (tmp_path / "job.log").read_text()
    info = executor._client.get_job_info(job.submission_id)
    shown = json.dumps([info.runtime_env, info.entrypoint, info.metadata])
    assert "s3cret" not in shown and "t0k3n" not in shown
    assert str(tmp_path / ".kappa-secret-env.json") in shown  # only where they are


@pytest.mark.parametrize(("settings", "says"), [
    ({"gpus": 64, "nodes": 8, "self_placing": True},
     "needs 8 node(s) × 8 GPU(s) (verl: trainer.nnodes × n_gpus_per_node); the Ray "
     "cluster has 0 node(s) with 8 or more GPUs"),
    ({"gpus": 1}, "needs one node with 1 CPU(s), 1 GPU(s)"),
])
def test_a_cell_the_cluster_can_never_hold_is_refused_at_submit(
        cluster: str, home: Path, tmp_path: Path, settings: dict[str, object],
        says: str) -> None:
    spec = _spec(tmp_path / "s.yaml", "too-big", cells=2, **settings)
    before = sorted(p.name for p in home.iterdir())
    for wait in ((), ("--wait",)):
        proc = process("submit", str(spec), "--executor", "ray_jobs", "--ray-address",
                       cluster, *wait, code=None)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert says in proc.stderr, proc.stderr
        assert "2 cell(s) could never start on the ray_jobs executor" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in home.iterdir()) == before  # no registry, no runs
