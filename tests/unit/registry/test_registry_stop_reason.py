"""``cells.stop_reason`` (migration 0003): recorded with the end of an attempt, cleared by
a rerun, and a cell failed by a stopping rule has no retries left. A registry made before
the column existed is refused until ``kappa db upgrade``."""

from __future__ import annotations

import pytest
from kit.cells import make_cells
from kit.cli import run_kappa
from sqlalchemy import text

from orchestrator.errors import UserInputError
from orchestrator.registry import CellState, Registry
from orchestrator.registry.engine import make_engine
from orchestrator.registry.schema import HEAD_REVISION, upgrade_schema

BEFORE = "0002_progress_heartbeat"


def _run(reg: Registry) -> None:
    (cell,) = reg.add_cells("toy", make_cells(1), max_retries=2)
    assert reg.transition(cell, CellState.PENDING, CellState.QUEUED)
    assert reg.transition(cell, CellState.QUEUED, CellState.RUNNING)


def test_a_diverged_cell_keeps_its_reason_and_has_no_retries(registry: Registry) -> None:
    _run(registry)
    (cell,) = registry.cells("toy")
    assert cell.stop_reason is None and cell.retries_left == 2
    assert registry.finish_attempt(cell, CellState.FAILED, exit_code=0,
                                   last_error="stopped: diverged at step 3",
                                   stop_reason="diverged at step 3 (e below 0.01)")
    (cell,) = registry.cells("toy")
    assert cell.stop_reason == "diverged at step 3 (e below 0.01)" and cell.retries_left == 0
    # An explicit rerun (resubmit) starts the cell afresh.
    assert registry.transition(cell, CellState.FAILED, CellState.PENDING)
    (cell,) = registry.cells("toy")
    assert cell.stop_reason is None and cell.retries_left == 2


def test_a_stopped_success_keeps_its_reason(registry: Registry) -> None:
    _run(registry)
    (cell,) = registry.cells("toy")
    registry.finish_attempt(cell, CellState.SUCCEEDED, exit_code=0, final_metrics={"a": 1.0},
                            stop_reason="plateau at step 40 (acc)")
    (cell,) = registry.cells("toy")
    assert (cell.state, cell.stop_reason) == (CellState.SUCCEEDED, "plateau at step 40 (acc)")


def test_an_older_registry_says_to_upgrade_and_kappa_db_upgrade_adds_the_column(
        registry_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    engine = make_engine(registry_url)
    upgrade_schema(engine, BEFORE)
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO sweeps (id, name, backend, spec_text, spec_hash, created_at,"
            " updated_at) VALUES (1, 'old', 'embedded', 'x', 'h', :t, :t)"),
            {"t": "2026-01-01 00:00:00"})
        conn.execute(text(
            "INSERT INTO cells (sweep_id, cell_id, cell_index, axes, settings, labels, state,"
            " attempts_count, max_retries, created_at) VALUES (1, 'abcdefabcdef', 0, '{}',"
            " '{}', '{}', 'failed', 1, 2, :t)"), {"t": "2026-01-01 00:00:00"})
    engine.dispose()
    with pytest.raises(UserInputError, match="older kappa") as info:
        Registry.open(registry_url)
    assert (info.value.problems[0].fix or "").startswith("kappa db upgrade")

    ran = run_kappa(capsys, "db", "upgrade", "--registry", registry_url)
    assert ran.code == 0, ran.output
    assert f"{BEFORE} -> {HEAD_REVISION}" in ran.output
    with Registry.open(registry_url) as reg:
        cell = reg.get_cell("old", "abcdef")
        assert cell.stop_reason is None and cell.retries_left == 2
