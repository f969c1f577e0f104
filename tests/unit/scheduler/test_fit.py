"""Cells that ask for more than the executor can ever give are refused up front, not left
pending (:mod:`orchestrator.scheduler.order`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.backends import get_backend
from orchestrator.errors import UserInputError
from orchestrator.executors.base import JobResources
from orchestrator.executors.local import LocalExecutor
from orchestrator.registry import Registry
from orchestrator.scheduler.order import check_fit, job_resources
from orchestrator.spec.model import Resources
from orchestrator.sweeps.driver import submit

SPEC = """\
name: needs-gpus
backend: embedded
base: {task: addition, max_steps: 2}
axes:
  device: [cpu, cuda]
"""


def test_cells_needing_more_gpus_than_visible_are_refused() -> None:
    backend = get_backend("embedded")
    cells = [(cell_id, backend.demand(backend.validate({"task": "addition", "device": device})))
             for cell_id, device in (("a" * 12, "cuda"), ("b" * 12, "cpu"))]
    check_fit(cells, LocalExecutor(gpus=["0"]), Resources())  # one GPU: fits
    with pytest.raises(UserInputError) as info:
        check_fit(cells, LocalExecutor(gpus=[]), Resources())
    (problem,) = info.value.problems
    assert "1 cell(s) could never start on the local executor" in problem.message
    assert "needs 1 GPU(s) per job; 0 GPU(s) visible to the local executor" in problem.message
    assert "aaaaaaaaaaaa" in (problem.found or "") and "bbbb" not in (problem.found or "")


def test_job_resources_come_from_the_launch_and_the_spec() -> None:
    embedded = get_backend("embedded")
    demand = embedded.demand(embedded.validate({"task": "addition", "device": "cuda"}))
    assert job_resources(demand, Resources(cpus=3, hours=2.0)) == JobResources(
        gpus=1, nodes=1, cpus=3, hours=2.0, self_placing=False)


def test_submit_refuses_before_writing_anything(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    with pytest.raises(UserInputError, match="more than the local executor can ever give"):
        submit(spec, wait=True, executor=LocalExecutor(gpus=[]))
    with Registry.open() as reg:
        assert reg.list_sweeps() == []
    assert not (tmp_path / "home" / "mlflow.db").exists()


def test_a_verl_job_asks_for_the_cpus_its_placement_groups_need() -> None:
    """verl bundles 3 CPUs with each GPU plus one for its TaskRunner: a job given fewer
    (the spec's default ``cpus: 1`` on SLURM) would wait forever with its GPUs idle."""
    from orchestrator.backends.verl.backend import VerlBackend
    from orchestrator.scheduler.order import job_resources
    from orchestrator.spec.model import Resources

    backend = VerlBackend()
    settings = backend.settings_model.model_validate(
        {"baseline": "grpo", "model_path": "/m", "train_files": "/t.parquet",
         "val_files": "/v.parquet", "nnodes": 2, "n_gpus_per_node": 4})
    need = job_resources(backend.demand(settings), Resources(gpus=4, nodes=2, cpus=1))
    assert (need.gpus, need.nodes, need.cpus, need.self_placing) == (8, 2, 13, True)
    more = job_resources(backend.demand(settings), Resources(gpus=4, nodes=2, cpus=32))
    assert more.cpus == 32  # a spec asking for more keeps it
