"""A setting is validated once at submit and once more at most inside the job that runs it:
the scheduler's pass (launch order, fit) and its launches read the demand each cell
stored at submit and validate nothing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kit.idle_job import IdleJob

from orchestrator.backends import get_backend
from orchestrator.backends.embedded.backend import EmbeddedBackend
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.executors.base import Executor, JobHandle, JobResources
from orchestrator.registry import CellState, Registry
from orchestrator.scheduler.hooks import NullTracker
from orchestrator.scheduler.order import job_resources
from orchestrator.sweeps.driver import build_scheduler
from orchestrator.sweeps.submission import prepare

SPEC = """\
name: unvalidated
backend: embedded
base: {task: addition, max_steps: 3}
axes:
  seed: [0, 1, 2]
resources: {cpus: 2, hours: 0.5}
"""


class _Recorder(Executor):
    """Takes every job and runs none: what the loop asked for is all that matters here."""

    name = "recorder"
    job_id_prefix = "rec:"

    def __init__(self) -> None:
        self.jobs: list[tuple[tuple[str, ...], JobResources]] = []

    def submit(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: Path, log_path: Path,
               resources: JobResources = JobResources()) -> JobHandle:
        self.jobs.append((argv, resources))
        return IdleJob(f"rec:{len(self.jobs)}")

    def capacity(self, gpus: int = 0) -> int:
        return 8 - len(self.jobs)

    def reattach(self, job_id: str) -> JobHandle | None:
        return None


def test_a_scheduler_pass_and_its_launches_validate_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    prepared = prepare(spec)  # the submit: validates, and judges each cell's demand
    backend = get_backend("embedded")
    expected = job_resources(backend.demand(backend.validate(prepared.cells[0].settings)),
                             prepared.spec.resources)
    with Registry.open() as registry:
        registry.upsert_sweep(prepared.name, backend="embedded", spec_text=SPEC,
                              plan=prepared.plan.to_json())
        registry.add_cells(prepared.name, prepared.cells,
                           demands={k: d.to_json() for k, d in prepared.demands.items()})

        validated: list[str] = []
        plain = EmbeddedBackend.validate
        model_validate = EmbeddedSettings.model_validate

        def spy_validate(self: EmbeddedBackend, settings: Mapping[str, Any]) -> Any:
            validated.append("Backend.validate")
            return plain(self, settings)

        def spy_model(cls: type[EmbeddedSettings], obj: Any, **kwargs: Any) -> Any:
            validated.append("settings_model.model_validate")
            return model_validate(obj, **kwargs)

        monkeypatch.setattr(EmbeddedBackend, "validate", spy_validate)
        monkeypatch.setattr(EmbeddedSettings, "model_validate", classmethod(spy_model))
        assert backend.validate({"task": "addition"}) and validated  # the spies work
        validated.clear()

        executor = _Recorder()
        scheduler = build_scheduler(registry, registry.get_sweep(prepared.name), backend,
                                    executor, NullTracker())
        scheduler.step()  # one pass: order, fit, three launches
        assert validated == []
        assert [resources for _, resources in executor.jobs] == [expected] * 3
        assert expected == JobResources(gpus=0, nodes=1, cpus=2, hours=0.5,
                                        self_placing=False)
        assert all(argv[1:4] == ("-m", "orchestrator", "train") for argv, _ in executor.jobs)
        assert registry.counts(prepared.name)[CellState.RUNNING] == 3
