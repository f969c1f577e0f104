"""Results and curves from a real MLflow store when the run folder is elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit.cells import make_cell

from orchestrator.analysis.curves import load_curves
from orchestrator.analysis.sources import results


def test_final_metrics_and_history_come_from_mlflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = pytest.importorskip("orchestrator.registry")
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("sweep-m", artifact_location=str(tmp_path / "art"))
    run = client.create_run(experiment)
    run_id = run.info.run_id
    # MLflow rejects "@": names are logged as verl's MLflow logger spells them ("_at_").
    client.log_batch(
        run_id,
        metrics=[Metric("val-core/arith/acc/mean_at_1", 0.1 * s, 0, s) for s in range(1, 8)]
        + [Metric("eval/arith/mean_at_8", 0.61, 0, 8), Metric("actor/entropy", 1.0, 0, 1)],
    )

    state = registry.CellState
    with registry.Registry.open() as reg:
        reg.upsert_sweep("m", backend="verl", spec_text="name: m\n")
        reg.add_cells("m", [make_cell("c0", 0, {"seed": 0})])
        reg.update_cell(("m", "c0"), mlflow_run_id=run_id)  # no run_dir: a remote run
        assert reg.transition(("m", "c0"), state.PENDING, state.QUEUED)
        assert reg.start_attempt(("m", "c0")) is not None
        assert reg.finish_attempt(("m", "c0"), state.SUCCEEDED, exit_code=0)

    frame = results("m", mlflow_uri=uri)
    assert frame.loc[0, "metric.eval/arith/mean@8"] == pytest.approx(0.61)
    assert "metric.actor/entropy" not in frame.columns  # only eval/* are final metrics
    curves = load_curves(frame, ["val-core/*/acc/mean@1"], uri)
    assert list(curves["step"]) == list(range(1, 8))
    assert list(curves["value"]) == pytest.approx([0.1 * s for s in range(1, 8)])
