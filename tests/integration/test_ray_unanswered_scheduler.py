"""A cluster that does not answer a submit costs the cell no retry (the scheduler waits
and submits again, as for an unreachable tracking store); a refusal still does."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from kit.fake_backend import write_spec
from kit.home import use_home

from orchestrator.executors.base import JobResources
from orchestrator.executors.local import LocalExecutor, LocalJob
from orchestrator.executors.ray_client import RayJobsError, RayUnreachableError
from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.driver import submit


class Unanswered(LocalExecutor):
    """Local jobs, but the first ``silent`` submits get ``error`` instead."""

    def __init__(self, silent: int, error: Exception) -> None:
        super().__init__(max_parallel=1, gpus=[])
        self.silent, self.error = silent, error

    def submit(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: Path,
               log_path: Path, resources: JobResources = JobResources()) -> LocalJob:
        if self.silent > 0:
            self.silent -= 1
            raise self.error
        return super().submit(argv, env, cwd, log_path, resources)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch)


def test_an_unanswered_submit_is_not_charged(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "ray-silent", seeds=1, steps=1)  # retries: 0
    silent = RayUnreachableError("the Ray Jobs API at http://head:8265 did not answer")
    submit(spec, wait=True, executor=Unanswered(2, silent))
    with Registry.open() as reg:
        (cell,) = reg.cells("ray-silent")
        assert cell.state is CellState.SUCCEEDED, cell
        states = [a.state for a in reg.attempts(cell)]
    assert states == [CellState.FAILED, CellState.FAILED, CellState.SUCCEEDED]


def test_a_refused_submit_is_a_failed_attempt(home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "ray-refused", seeds=1, steps=1)  # retries: 0
    submit(spec, wait=True, executor=Unanswered(1, RayJobsError("Ray refused job x: bad")))
    with Registry.open() as reg:
        (cell,) = reg.cells("ray-refused")
        assert cell.state is CellState.FAILED and "refused" in (cell.last_error or ""), cell
