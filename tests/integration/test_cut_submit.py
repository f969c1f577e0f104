"""A submit SIGKILLed between recording its sweep and its cells (two transactions) leaves a
sweep without cells; `kappa resume` must not run nothing and call it done: it refuses
(exit 2) and says to submit again, which records the cells and runs them."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit.cli import run_kappa, user_error
from kit.fake_backend import write_spec
from kit.home import use_home

from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.submission import prepare


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch)


def test_a_sweep_recorded_without_its_cells_is_resubmitted_not_resumed(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path / "cut.yaml", "cut", seeds=2)
    prepared = prepare(spec)
    with Registry.open() as reg:  # what the killed submit left: the sweep row, no cells
        reg.upsert_sweep("cut", backend="fake", spec_text=prepared.spec.source_text,
                         plan=prepared.plan.to_json())
    error = user_error(capsys, "resume", "cut", "--wait")
    assert "recorded without its cells" in error.summary
    assert "kappa submit SPEC" in (error.problems[0].fix or "")
    with Registry.open() as reg:
        assert reg.cell_keys("cut") == [] and reg.lease("cut") is None  # nothing written
    ran = run_kappa(capsys, "submit", str(spec), "--wait")
    assert ran.code == 0, ran.output
    with Registry.open() as reg:
        assert [c.state for c in reg.cells("cut")] == [CellState.SUCCEEDED] * 2
