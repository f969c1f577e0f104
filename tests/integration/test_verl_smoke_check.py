"""smoke_check against a real SQLite registry and a real MLflow store.

FAKE RUNS: no GPU exists on this machine, so the smoke sweep cannot run here. The
registry rows and MLflow runs below are written by :func:`fake_verl_cell`, which stands
in for the scheduler and verl's MLflow logger (same run, same metric keys and steps).
The checker reads them exactly as it reads a real smoke sweep's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kit.home import seed_mlflow_store

from orchestrator.backends.verl.smoke_check import (
    CLOCK_SLACK_S,
    check_smoke,
    metric_problems,
    verdict_lines,
    verdicts_json,
)
from orchestrator.sweeps import smoke as smoke_spec

if TYPE_CHECKING:
    from orchestrator.registry import CellRecord, Registry
    from orchestrator.tracking import Tracker

GOOD = {"actor/pg_loss": (-0.03, 0.02), "actor/grad_norm": (0.41, 0.37),
        "timing_s/gen": (1.9, 1.2)}


@dataclass
class Stores:
    registry: Registry
    tracker: Tracker
    parent: str = ""  # the sweep's MLflow parent run


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    from orchestrator.registry import Registry
    from orchestrator.tracking import Tracker

    root = tmp_path_factory.mktemp("smoke_check")
    seed_mlflow_store(root)  # a copy of an initialised store: no migrations per test run
    registry = Registry.open(f"sqlite:///{root / 'registry.db'}")
    yield Stores(registry, Tracker(f"sqlite:///{root / 'mlflow.db'}", root / "artifacts"))
    registry.close()


def record_sweep(stores: Stores, name: str, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> list[CellRecord]:
    """The smoke spec (named ``name``) recorded as a submit records it: registry cells,
    MLflow experiment and parent run."""
    from orchestrator.sweeps.submission import prepare, record

    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KAPPA_VERL_PREFLIGHT", "off")
    data = yaml.safe_load(smoke_spec.spec_text(tmp_path / "smoke"))
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(data | {"name": name}, sort_keys=False))
    stores.parent = record(prepare(spec), stores.registry, stores.tracker).parent_run_id
    return sorted(stores.registry.cells(name), key=lambda c: c.index)


def fake_verl_cell(stores: Stores, cell: CellRecord,
                   metrics: Mapping[str, tuple[float | None, ...]],
                   state: str = "succeeded", mlflow: bool = True,
                   logged_ms: int | None = None) -> None:
    """FAKE: what the scheduler and verl's MLflow logger leave for one cell on a GPU
    (run created, attempt started, metrics at steps 1.. where not None, attempt finished)."""
    from mlflow.entities import Metric

    from orchestrator.registry import CellState

    reg, tracker = stores.registry, stores.tracker
    if mlflow:
        run_id = tracker.create_cell_run(stores.parent, cell, cell.sweep_name)
        reg.update_cell(cell, mlflow_run_id=run_id)
    reg.transition(cell, CellState.PENDING, CellState.QUEUED)
    reg.start_attempt(cell)
    if mlflow:
        now = logged_ms if logged_ms is not None else int(time.time() * 1000)
        points = [Metric(key, value, now, step) for key, values in metrics.items()
                  for step, value in enumerate(values, 1) if value is not None]
        tracker.client.log_batch(run_id, metrics=points)
    reg.finish_attempt(cell, CellState(state), exit_code=0 if state == "succeeded" else 1)


def test_good_cells_pass(stores: Stores, tmp_path: Path,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    cells = record_sweep(stores, "smoke-good", tmp_path, monkeypatch)
    assert len(cells) == 12
    for cell in cells:
        fake_verl_cell(stores, cell, GOOD)
    verdicts = check_smoke(stores.registry, stores.tracker.client, "smoke-good")
    assert [v.passed for v in verdicts] == [True] * 12
    assert verdict_lines(verdicts)[-1] == "smoke: all 12 cells passed"
    assert verdicts[0].label == "baseline=grpo reward_budget=False"


def test_bad_cells_are_named_with_the_failing_metric(stores: Stores, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cells = record_sweep(stores, "smoke-bad", tmp_path, monkeypatch)
    long_ago = int(time.time() * 1000) - (CLOCK_SLACK_S + 600) * 1000
    bad: dict[int, dict[str, Any]] = {
        1: dict(metrics=GOOD | {"actor/grad_norm": (0.4, 0.0)}),
        2: dict(metrics={k: v for k, v in GOOD.items() if k != "timing_s/gen"}),
        3: dict(metrics=GOOD, state="failed"),
        4: dict(metrics=GOOD | {"actor/pg_loss": (math.nan, 0.1)}),
        5: dict(metrics={k: v[:1] for k, v in GOOD.items()}),  # died after step 1
        6: dict(metrics=GOOD, logged_ms=long_ago),  # an earlier run's metrics only
        7: dict(metrics={}, mlflow=False),
        # Only the end-of-run summary (kappa logs the last values at the last step).
        8: dict(metrics={k: (None, v[1]) for k, v in GOOD.items()}),
    }
    for cell in cells:
        fake_verl_cell(stores, cell, **bad.get(cell.index, {"metrics": GOOD}))
    verdicts = check_smoke(stores.registry, stores.tracker.client, "smoke-bad")
    problems = {v.cell_id: list(v.problems) for v in verdicts if not v.passed}
    by_index = {c.index: c.cell_id for c in cells}
    assert set(problems) == {by_index[i] for i in bad}
    assert problems[by_index[1]] == ["actor/grad_norm = 0.0 at step 2 (must be > 0)"]
    assert problems[by_index[2]] == ["timing_s/gen: never logged"]
    assert len(problems[by_index[3]]) == 1
    assert problems[by_index[3]][0].startswith("ended failed (exit code 1), not succeeded")
    assert problems[by_index[4]] == ["actor/pg_loss = nan at step 1 (not finite)"]
    assert problems[by_index[5]] == [f"{k}: no value at step 2" for k in GOOD]
    assert problems[by_index[6]] == [f"{k}: never logged" for k in GOOD]
    assert problems[by_index[7]] == ["no MLflow run recorded"]
    assert problems[by_index[8]][-1].startswith("only step 2's summary reached MLflow")
    text = "\n".join(verdict_lines(verdicts))
    assert f"FAIL  baseline=grpo reward_budget=True  ({by_index[1]}, succeeded)" in text
    assert "      actor/grad_norm = 0.0 at step 2 (must be > 0)" in text
    assert text.endswith("smoke: 8 of 12 cells failed")
    assert sum(not v["passed"] for v in verdicts_json(verdicts)) == 8


def test_metric_problems_needs_every_step() -> None:
    history = {"actor/pg_loss": {1: 0.1, 2: 0.0}, "actor/grad_norm": {1: 1.0, 2: -1.0},
               "timing_s/gen": {2: 3.0}}
    assert metric_problems(history) == ["actor/grad_norm = -1.0 at step 2 (must be > 0)",
                                        "timing_s/gen: no value at step 1"]
