"""Cells that need more GPUs than the executor has are refused up front, not left pending."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.backends import get_backend
from orchestrator.errors import UserInputError
from orchestrator.executors.local import LocalExecutor
from orchestrator.registry import Registry
from orchestrator.scheduler.driver import submit
from orchestrator.scheduler.gpu_fit import check_gpus_fit

SPEC = """\
name: needs-gpus
backend: embedded
base: {task: addition, max_steps: 2}
axes:
  device: [cpu, cuda]
"""


def test_cells_needing_more_gpus_than_visible_are_refused() -> None:
    backend = get_backend("embedded")
    cells = [("a" * 12, {"task": "addition", "device": "cuda"}),
             ("b" * 12, {"task": "addition", "device": "cpu"})]
    check_gpus_fit(backend, cells, LocalExecutor(gpus=["0"]))  # one GPU: fits
    with pytest.raises(UserInputError) as info:
        check_gpus_fit(backend, cells, LocalExecutor(gpus=[]))
    (problem,) = info.value.problems
    assert "1 cell(s) need 1 GPUs" in problem.message
    assert "aaaaaaaaaaaa" in (problem.found or "") and "bbbb" not in (problem.found or "")
    assert "0 GPU(s) visible to the local executor" in (problem.found or "")


def test_submit_refuses_before_writing_anything(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    with pytest.raises(UserInputError, match="more GPUs"):
        submit(spec, wait=True, executor=LocalExecutor(gpus=[]))
    with Registry.open() as reg:
        assert reg.list_sweeps() == []
    assert not (tmp_path / "home" / "mlflow.db").exists()
