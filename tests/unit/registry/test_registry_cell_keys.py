"""Registry calls made for many cells at once: what a scheduler pass reads of the waiting
cells (ids and indexes, ``cell_keys``; whole cells for the few it needs, ``cells_by_id``)
and the run folders a submit records (``set_run_dirs``)."""

from __future__ import annotations

from kit.cells import make_cells

from orchestrator.registry import CellState, Registry


def test_cell_keys_are_ids_and_indexes_by_index_optionally_by_state(
        registry: Registry) -> None:
    cells = registry.add_cells("toy", list(reversed(make_cells(5))))
    by_index = sorted(cells, key=lambda c: c.index)
    registry.transition(by_index[1], CellState.PENDING, CellState.QUEUED)
    assert registry.cell_keys("toy") == [(c.cell_id, c.index) for c in by_index]
    assert registry.cell_keys("toy", [CellState.PENDING]) == [
        (c.cell_id, c.index) for c in by_index if c.index != 1]
    assert registry.cell_keys("toy", [CellState.RUNNING]) == []


def test_cells_by_id_reads_just_those_cells_across_many_ids(registry: Registry) -> None:
    registry.add_cells("toy", make_cells(1200))
    wanted = [c.cell_id for c in registry.cells("toy")][::-2]  # 600: more than one query
    found = registry.cells_by_id("toy", [*wanted, "nosuchcell", wanted[0]])
    assert [c.cell_id for c in found] == list(reversed(wanted))
    assert all(c.settings["seed"] == c.index for c in found)
    assert registry.cells_by_id("toy", []) == []


def test_set_run_dirs_records_many_folders_in_one_call(registry: Registry) -> None:
    cells = registry.add_cells("toy", make_cells(3))
    registry.set_run_dirs("toy", {cells[0].cell_id: "/runs/a", cells[2].cell_id: "/runs/c"})
    registry.set_run_dirs("toy", {})
    assert [c.run_dir for c in registry.cells("toy")] == ["/runs/a", None, "/runs/c"]
