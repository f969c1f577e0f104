"""A tiny sweep on the real embedded trainer, through the scheduler (slow: trains)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit.home import use_home
from kit.tiny_spec import tiny_embedded

from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.driver import submit

TINY = tiny_embedded("tiny-embedded", {"baseline": ["grpo", "drgrpo"]}, val_every=2,
                     checkpoint_every=1)


@pytest.mark.slow
def test_tiny_embedded_sweep_logs_into_the_cells_child_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_home(tmp_path / "home", monkeypatch)
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY)
    submit(spec, wait=True, max_parallel=2)
    with Registry.open() as reg:
        cells = reg.cells("tiny-embedded")
    assert [c.state for c in cells] == [CellState.SUCCEEDED] * 2
    from mlflow import MlflowClient

    from orchestrator.tracking import Tracker

    client = MlflowClient(Tracker().uri)
    for cell in cells:
        assert cell.progress_step == 3
        assert any(k.startswith("val-core/") for k in cell.final_metrics or {})
        run = client.get_run(cell.mlflow_run_id or "")
        assert run.info.status == "FINISHED"
        # The trainer logged its step metrics into the run the scheduler created.
        assert "actor/entropy" in run.data.metrics
        assert len(client.get_metric_history(run.info.run_id, "actor/entropy")) == 3
