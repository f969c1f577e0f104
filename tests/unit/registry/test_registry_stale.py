"""Stale results as the registry reads them (SQLite and PostgreSQL): each succeeded cell's
recorded numerics in one query (``finished_numerics``), and which of a spec's cells other
numerics made than the installed ones (``stale_cells``), as ``plan`` and ``submit`` say it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kit.cells import make_cells
from kit.cli import run_kappa
from kit.tiny_spec import tiny_embedded
from old_registry import old_registry

from orchestrator.grid.plan import load_plan
from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.staleness import SHOWN_IDS, StaleCells, rerun_command, stale_cells

INSTALLED = {"backend": "embedded", "version": "2", "torch": "2.13.0"}


def _finish(registry: Registry, numerics: list[dict[str, Any] | str | None]) -> list[str]:
    """A cell per entry: succeeded with that provenance's numerics (``None``: no provenance),
    or left in the state a text names; their ids."""
    cells = registry.add_cells("toy", make_cells(len(numerics)))
    for cell, made in zip(cells, numerics, strict=True):
        if isinstance(made, str):
            continue
        registry.transition(cell, CellState.PENDING, CellState.QUEUED)
        registry.start_attempt(cell)
        registry.finish_attempt(cell, CellState.SUCCEEDED, exit_code=0, provenance=None
                                if made is None else {"numerics": made, "machine": {}})
    return [c.cell_id for c in cells]


def test_finished_numerics_reads_each_succeeded_cells_numerics(registry: Registry) -> None:
    made = {"backend": "embedded", "version": "1", "torch": "2.12.0", "base_model": "ab12"}
    ids = _finish(registry, [made, None, "pending", dict(made)])
    cells, distinct = registry.finished_numerics("toy")
    assert [(cell_id, distinct[k]) for cell_id, k in cells] == [
        (ids[0], made), (ids[1], None), (ids[3], made)]
    assert len(distinct) == 2  # each distinct record parsed (and judged) once


def test_stale_cells_are_the_specs_finished_cells_made_by_other_numerics(
        registry: Registry) -> None:
    same = {**INSTALLED, "base_model": "ab12"}  # a field the installed side does not know
    older = {**INSTALLED, "version": "1"}
    ids = _finish(registry, [same, older, older, None, {**older, "torch": "2.12.0"}, "pending"])
    found = stale_cells(registry, "toy", set(ids[:-2]) | {ids[-1]}, INSTALLED)
    assert found.cell_ids == (ids[1], ids[2], ids[3])  # not the cell outside the spec
    assert found.differences == {"numerics version 1 vs 2": 2, "no provenance recorded": 1}
    assert found.installed == "embedded v2, torch 2.13.0"
    assert not stale_cells(registry, "toy", {ids[0], ids[-1]}, INSTALLED)


def test_what_plan_and_submit_print_caps_the_ids() -> None:
    ids = tuple(f"{i:012x}" for i in range(SHOWN_IDS + 5))
    stale = StaleCells("toy", "embedded v2", ids, {"numerics version 1 vs 2": len(ids)})
    hint = rerun_command("specs/toy.yaml", ["axes.seed=[0, 1]"])
    assert hint == "kappa submit specs/toy.yaml 'axes.seed=[0, 1]' --rerun-stale"
    head, listed, kept = stale.lines(hint)
    assert head == ("25 finished cells are stale (made by other numerics than the installed "
                    "embedded v2): numerics version 1 vs 2 (25 cells)")
    assert listed == f"  stale: {', '.join(ids[:SHOWN_IDS])} and 5 more"
    assert kept.startswith("kept: ") and kept.endswith(f"`{hint}` runs them again")
    assert stale.lines(hint, rerun=True)[-1].startswith("they run again")
    nothing = StaleCells("toy", "embedded v2")
    assert nothing.lines(hint) == []
    assert nothing.lines(hint, rerun=True) == [
        "nothing stale: every finished cell of toy was made by the installed numerics "
        "(embedded v2)"]


def test_plan_lists_an_older_kappas_finished_cells_and_notes_an_outdated_registry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    spec = tmp_path / "old.yaml"
    spec.write_text(tiny_embedded("old", {"seed": [0, 1]}))
    given = [(c.cell_id, c.settings) for c in load_plan(spec).cells]
    outdated, upgraded = (f"sqlite:///{tmp_path / name}" for name in ("0004.db", "up.db"))
    old_registry(outdated, spec.read_text(), given, state="succeeded")
    noted = run_kappa(capsys, "plan", str(spec), "--registry", outdated)
    assert noted.code == 0 and "2 cells ×" in noted.out  # the plan, all the same
    assert "stale results not checked" in noted.err and "kappa db upgrade" in noted.err
    old_registry(upgraded, spec.read_text(), given, state="succeeded", upgrade=True)
    listed = run_kappa(capsys, "plan", str(spec), "--registry", upgraded)
    assert listed.code == 0
    assert "2 finished cells are stale" in listed.out
    assert "no provenance recorded (2 cells)" in listed.out
    with Registry.open(upgraded) as reg:  # its settings stay as that kappa stored them
        assert [(c.cell_id, c.settings) for c in reg.cells("old")] == given
