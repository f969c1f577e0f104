"""``attempts.provenance`` and ``cells.provenance`` (migration 0006): an attempt's ending
stores what its process recorded, on the attempt and the cell; a rerun clears the cell's;
a registry made before the columns existed is refused until ``kappa db upgrade``, after
which its old cells have none (``kappa plan`` counts them stale)."""

from __future__ import annotations

import pytest
from kit.cells import make_cells
from kit.cli import run_kappa

from orchestrator.errors import UserInputError
from orchestrator.registry import CellState, Registry
from orchestrator.registry.engine import make_engine
from orchestrator.registry.schema import HEAD_REVISION, upgrade_schema

MADE = {"kappa": {"version": "0.1.0", "commit": "abc", "dirty": False},
        "numerics": {"backend": "embedded", "version": "1", "torch": "2.13.0"},
        "machine": {"cpu_capability": "AVX2", "host": "h"}}


def test_each_attempt_keeps_its_own_and_the_cell_its_latest(registry: Registry) -> None:
    (cell,) = registry.add_cells("toy", make_cells(1), max_retries=2)
    assert registry.transition(cell, CellState.PENDING, CellState.QUEUED)
    assert registry.start_attempt(cell) is not None
    assert registry.finish_attempt(cell, CellState.FAILED, exit_code=1)  # died before writing
    assert registry.transition(cell, CellState.FAILED, CellState.PENDING)
    assert registry.transition(cell, CellState.PENDING, CellState.QUEUED)
    assert registry.start_attempt(cell) is not None
    assert registry.finish_attempt(cell, CellState.SUCCEEDED, exit_code=0, provenance=MADE,
                                   final_metrics={"a": 1.0})
    (cell,) = registry.cells("toy")
    assert cell.provenance == MADE
    assert [a.provenance for a in registry.attempts(cell)] == [None, MADE]
    # A rerun (resubmit) starts afresh: the cell has no provenance until its next attempt.
    assert registry.transition(cell, CellState.SUCCEEDED, CellState.PENDING)
    (cell,) = registry.cells("toy")
    assert cell.provenance is None
    assert [a.provenance for a in registry.attempts(cell)] == [None, MADE]


def test_a_0005_registry_says_to_upgrade_and_the_upgrade_adds_the_columns(
        registry_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    engine = make_engine(registry_url)
    upgrade_schema(engine, "0005_sweep_plan")
    engine.dispose()
    with pytest.raises(UserInputError, match="older kappa") as info:
        Registry.open(registry_url)
    assert (info.value.problems[0].fix or "").startswith("kappa db upgrade")
    refused = run_kappa(capsys, "status", "--registry", registry_url)
    assert refused.code == 2 and "kappa db upgrade" in refused.output
    ran = run_kappa(capsys, "db", "upgrade", "--registry", registry_url)
    assert ran.code == 0 and f"0005_sweep_plan -> {HEAD_REVISION}" in ran.output
    with Registry.open(registry_url) as reg:
        reg.upsert_sweep("toy", backend="embedded", spec_text="name: toy\n")
        (cell,) = reg.add_cells("toy", make_cells(1))
        assert cell.provenance is None
