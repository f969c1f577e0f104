"""The results frame: schema, run-folder source, the real registry, curves from run folders."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from kit.cells import make_cell
from kit.synthetic import synthetic_cells, write_run_folders

from orchestrator.analysis.curves import load_curves
from orchestrator.analysis.frame import (
    CellResult,
    axis_names,
    frame_from_results,
    metric_names,
    varying_axes,
)
from orchestrator.analysis.sources import cells_from_run_folders, results
from orchestrator.errors import UserInputError
from orchestrator.runs.metrics import metric_curves


def test_schema_columns_in_order() -> None:
    frame = frame_from_results(
        [
            CellResult(
                "s",
                "a",
                "succeeded",
                {"baseline": "grpo", "seed": 0},
                {"eval/b2/mean@8": 0.5, "eval/b1/mean@8": 0.25},
                "/r/a",
                "run-a",
            ),
            CellResult("s", "b", "failed", {"baseline": "dapo", "seed": 1, "lr": 0.1}, {}),
        ]
    )
    assert list(frame.columns) == [
        "sweep",
        "cell_id",
        "state",
        "axis.baseline",
        "axis.seed",
        "axis.lr",
        "metric.eval/b2/mean@8",
        "metric.eval/b1/mean@8",
        "run_dir",
        "mlflow_run_id",
        "stop_reason",
        "step",
        "total_steps",
        "numerics",
    ]
    assert axis_names(frame) == ["baseline", "seed", "lr"]
    assert metric_names(frame) == ["eval/b2/mean@8", "eval/b1/mean@8"]
    assert math.isnan(frame.loc[1, "metric.eval/b1/mean@8"])
    assert frame.loc[0, "axis.seed"] == 0 and frame.loc[1, "axis.lr"] == 0.1
    assert frame.loc[0, "axis.lr"] is None
    assert varying_axes(frame) == ["baseline", "seed", "lr"]
    assert varying_axes(frame, exclude=["seed"]) == ["baseline", "lr"]


def test_bool_axis_values_keep_their_type() -> None:
    frame = frame_from_results(
        [
            CellResult("s", "a", "succeeded", {"rb": True}),
            CellResult("s", "b", "succeeded", {"rb": False}),
        ]
    )
    assert [type(v) for v in frame["axis.rb"]] == [bool, bool]


def test_results_from_run_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    cells = synthetic_cells("toy", baselines=("grpo",), seeds=(0, 1), failed=("tiny-grpo-rb1-s1",))
    write_run_folders(tmp_path / "runs", cells, steps=12)
    frame = results("toy")
    assert len(frame) == 4
    assert dict(zip(frame["cell_id"], frame["state"], strict=True))["tiny-grpo-rb1-s1"] == "failed"
    ok = frame[frame["cell_id"] == "tiny-grpo-rb0-s0"].iloc[0]
    assert ok["metric.eval/amc23/mean@8"] == pytest.approx(
        cells[0].final_metrics["eval/amc23/mean@8"]
    )
    assert ok["axis.reward_budget"] is False or ok["axis.reward_budget"] == False  # noqa: E712
    # The SQLite registry file is not created just to be read.
    assert not (tmp_path / "registry.db").exists()


def test_unknown_sweep_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    with pytest.raises(UserInputError, match="no results for sweep 'nope'"):
        results("nope")


def test_run_folder_states_without_cell_json(tmp_path: Path) -> None:
    (tmp_path / "s" / "running").mkdir(parents=True)
    (tmp_path / "s" / "running" / "progress.json").write_text('{"step": 3, "total_steps": 9}')
    (tmp_path / "s" / "pending").mkdir()
    done = tmp_path / "s" / "done"
    done.mkdir()
    (done / "summary.json").write_text(
        json.dumps({"status": "succeeded", "steps": 9, "final": {"eval/x/mean@8": 0.5}})
    )
    by_id = {c.cell_id: c for c in cells_from_run_folders("s", tmp_path)}
    assert {k: c.state for k, c in by_id.items()} == {
        "done": "succeeded",
        "pending": "pending",
        "running": "running",
    }
    assert by_id["done"].final_metrics == {"eval/x/mean@8": 0.5}


def test_only_cell_folders_are_cells(tmp_path: Path) -> None:
    """A rerun's earlier folder (``<id>.prev-1``), the groups' decisions (``.groups``) and
    a folder named like a file are not cells (before, each was one more cell with no axes,
    and a report of the sweep failed with a KeyError)."""
    for name in ("5a7a8b031953", "5a7a8b031953.prev-1", ".groups", "report.json", "x.\u2028"):
        (tmp_path / "s" / name).mkdir(parents=True)
    (tmp_path / "s" / "a-file").write_text("x")
    assert [c.cell_id for c in cells_from_run_folders("s", tmp_path)] == ["5a7a8b031953"]


def test_metrics_jsonl_keeps_last_value_and_skips_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 1, "metrics": {"a": 1.0}}\n'
        '{"step": 2, "metrics": {"a": 2.0, "b": 5}}\n'
        '{"step": 2, "metrics": {"a": 2.5}}\n'  # resumed launch re-logs step 2
        '{"step": 3, "metr'
    )
    assert metric_curves(path) == {"a": {1: 1.0, 2: 2.5}, "b": {2: 5.0}}
    assert metric_curves(tmp_path / "missing.jsonl") == {}


def test_load_curves_long_form_with_axes(tmp_path: Path) -> None:
    cells = write_run_folders(
        tmp_path, synthetic_cells("toy", baselines=("grpo",), seeds=(0,)), steps=9
    )
    curves = load_curves(frame_from_results(cells), ["val-core/*/acc/mean@1", "actor/entropy"])
    assert set(curves["metric"]) == {"val-core/arith/acc/mean@1", "actor/entropy"}
    one = curves[(curves["cell_id"] == "tiny-grpo-rb0-s0") & (curves["metric"] == "actor/entropy")]
    assert list(one["step"]) == list(range(1, 10))
    assert set(one["axis.baseline"]) == {"grpo"}


def test_results_from_the_real_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry_mod = pytest.importorskip("orchestrator.registry")
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    state = registry_mod.CellState
    with registry_mod.Registry.open() as reg:
        reg.upsert_sweep("reg", backend="embedded", spec_text="name: reg\n")
        reg.add_cells(
            "reg",
            [
                make_cell("c0", 0, {"baseline": "grpo", "seed": 0}),
                make_cell("c1", 1, {"baseline": "grpo", "seed": 1}),
                make_cell("c2", 2, {"baseline": "dapo", "seed": 0}),
            ],
        )
        for cell_id, final in (("c0", {"eval/x/mean@8": 0.5}), ("c1", {"eval/x/mean@8": 0.7})):
            assert reg.transition(("reg", cell_id), state.PENDING, state.QUEUED)
            assert reg.start_attempt(("reg", cell_id)) is not None
            assert reg.finish_attempt(
                ("reg", cell_id), state.SUCCEEDED, exit_code=0, final_metrics=final
            )
        reg.update_cell(("reg", "c1"), mlflow_run_id="abc123")
    frame = results("reg")
    assert list(frame["cell_id"]) == ["c0", "c1", "c2"]
    assert list(frame["state"]) == ["succeeded", "succeeded", "pending"]
    assert list(frame["metric.eval/x/mean@8"])[:2] == [0.5, 0.7]
    assert frame.loc[1, "mlflow_run_id"] == "abc123"
    assert list(frame["axis.baseline"]) == ["grpo", "grpo", "dapo"]
