"""What the registry alone must be enough for, and how a sweep's runs end.

* A submit killed while it wrote run folders leaves cells with no folder, no
  ``config.yaml`` or no recorded ``run_dir``: each launch is made from the registry.
* A launch that cannot be made is a failed attempt: the cell's retries apply.
* The sweep's parent MLflow run ends with the sweep: FINISHED, FAILED or KILLED, with the
  cell counts as tags.

In process, real SQLite registry, real MLflow store, real processes (the fake backend).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from kit.fake_backend import FakeBackend, write_spec
from kit.home import completions, use_home

from orchestrator.backends import LaunchSpec
from orchestrator.backends.base import Demand
from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.cancelling import cancel
from orchestrator.sweeps.driver import resume, submit
from orchestrator.sweeps.submission import prepare, record
from orchestrator.tracking import Tracker

LAUNCHES: list[str] = []


class FlakyLaunchBackend(FakeBackend):
    """The fake backend whose first two launches of each cell cannot be made."""

    name = "flaky-launch"

    def launch(self, settings: Mapping[str, Any], run_dir: Path, demand: Demand) -> LaunchSpec:
        LAUNCHES.append(run_dir.name)
        if LAUNCHES.count(run_dir.name) <= 2:
            raise RuntimeError("the cluster's image registry is down")
        return super().launch(settings, run_dir, demand)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    LAUNCHES.clear()
    return use_home(tmp_path / "home", monkeypatch, backends={
        "flaky-launch": f"{__name__}:FlakyLaunchBackend"})


def _parent(sweep: str) -> tuple[str, dict[str, str]]:
    from mlflow import MlflowClient

    with Registry.open() as reg:
        parent = reg.get_sweep(sweep).mlflow_parent_run_id or ""
    run = MlflowClient(Tracker().uri).get_run(parent)
    return run.info.status, run.data.tags


def test_cells_whose_submit_died_before_their_folders_run_from_the_registry(
    home: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "s.yaml", "half-written", seeds=4, steps=2)
    with Registry.open() as reg:
        record(prepare(spec), reg, Tracker())
        cells = reg.cells("half-written")
        # What a SIGKILL in the middle of writing the folders leaves: one folder gone,
        # one without its config.yaml, one whose run_dir never reached the registry.
        shutil.rmtree(Path(cells[0].run_dir or ""))
        (Path(cells[1].run_dir or "") / "config.yaml").unlink()
        shutil.rmtree(Path(cells[2].run_dir or ""))
        reg.update_cell(cells[2], run_dir=None)
    counts = resume("half-written")
    assert counts[CellState.SUCCEEDED] == 4
    with Registry.open() as reg:
        for cell in reg.cells("half-written"):
            assert cell.attempts_count == 1
            config = yaml.safe_load((Path(cell.run_dir or "") / "config.yaml").read_text())
            assert config == dict(cell.settings)
    assert sorted(completions(home)) == sorted(c.cell_id for c in cells)
    assert _parent("half-written")[0] == "FINISHED"


def test_a_launch_that_cannot_be_made_uses_the_retries(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "flaky", seeds=2, retries=2, steps=1)
    spec.write_text(spec.read_text().replace("backend: fake", "backend: flaky-launch"))
    submit(spec, wait=True)
    with Registry.open() as reg:
        for cell in reg.cells("flaky"):
            assert cell.state is CellState.SUCCEEDED
            attempts = reg.attempts(cell)
            assert [a.state.value for a in attempts] == ["failed", "failed", "succeeded"]
    status, tags = _parent("flaky")
    assert (status, tags["kappa.cells.succeeded"], tags["kappa.cells.failed"]) == (
        "FINISHED", "2", "0")


def test_a_cell_that_never_launches_fails_after_its_retries_and_fails_the_sweep(
    home: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "s.yaml", "never", seeds=1, retries=1, steps=1)
    spec.write_text(spec.read_text().replace("backend: fake", "backend: flaky-launch"))
    submit(spec, wait=True)
    with Registry.open() as reg:
        (cell,) = reg.cells("never")
        assert cell.state is CellState.FAILED and cell.attempts_count == 2
        assert "image registry is down" in (cell.last_error or "")
    status, tags = _parent("never")
    assert (status, tags["kappa.cells.failed"]) == ("FAILED", "1")


def test_a_cancelled_sweep_ends_its_runs_without_a_scheduler(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "stopped", seeds=2, steps=1)
    with Registry.open() as reg:
        record(prepare(spec), reg, Tracker())
    cancel("stopped")
    status, tags = _parent("stopped")
    assert (status, tags["kappa.cells.cancelled"]) == ("KILLED", "2")
    # Submitting it again reopens the parent run and ends it FINISHED.
    submit(spec, wait=True)
    assert _parent("stopped")[0] == "FINISHED"
