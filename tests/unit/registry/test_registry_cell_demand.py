"""A cell's demand (migration 0005): judged at submit and stored with the cell, and
judged at upgrade time for the cells an older registry holds (SQLite and PostgreSQL)."""

from __future__ import annotations

from old_registry import old_registry

from orchestrator.backends import get_backend
from orchestrator.registry import Registry
from orchestrator.registry.engine import make_engine
from orchestrator.registry.schema import HEAD_REVISION, upgrade_schema

SPEC = "name: old\nbackend: embedded\naxes:\n  seed: [0, 1]\n"
CELLS: list[tuple[str, dict[str, object]]] = [
    ("c" * 12, {"task": "addition", "device": "cuda", "max_steps": 7}),
    ("d" * 12, {"task": "addition", "max_steps": "seven"}),  # no longer validates
]


def test_upgrading_a_0004_registry_judges_its_cells_demands(registry_url: str) -> None:
    old_registry(registry_url, SPEC, CELLS)
    engine = make_engine(registry_url)
    before, after = upgrade_schema(engine)
    engine.dispose()
    assert (before.current, after.current) == ("0004_scheduler_lease", HEAD_REVISION)
    embedded = get_backend("embedded")
    with Registry.open(registry_url) as reg:
        judged, never = (reg.get_cell("old", cell_id) for cell_id, _ in CELLS)
        assert judged.demand == embedded.demand(embedded.validate(CELLS[0][1])).to_json()
        assert (judged.demand or {})["gpus"] == 1 and (judged.demand or {})["steps"] == 7
        assert never.demand is None  # its launch fails it, as an attempt


def test_add_cells_stores_the_demands_given(registry: Registry) -> None:
    from kit.cells import make_cell

    registry.upsert_sweep("toy", backend="embedded", spec_text="name: toy\n")
    demand = {"gpus": 2, "nodes": 1, "min_cpus": 1, "self_placing": False, "steps": 5,
              "env": {"A": "1"}}
    (new, bare) = registry.add_cells("toy", [make_cell("a1", 0), make_cell("b2", 1)],
                                     demands={"a1": demand})
    assert (new.demand, bare.demand) == (demand, None)
    assert registry.get_cell("toy", "a1").demand == demand
    assert registry.cells_by_id("toy", ["b2"])[0].demand is None


def test_a_cell_without_a_demand_gets_one_when_its_spec_is_submitted_again(
        registry_url: str) -> None:
    """Both kinds of missing demand are filled (SQL NULL from the upgrade, JSON null
    from an insert without one); a demand already stored is never replaced."""
    old_registry(registry_url, SPEC, CELLS[1:], upgrade=True)
    from kit.cells import make_cell

    given = {"gpus": 0, "nodes": 1, "min_cpus": 1, "self_placing": False, "steps": 3,
             "env": {}}
    other = {**given, "steps": 9}
    with Registry.open(registry_url) as reg:
        assert reg.get_cell("old", CELLS[1][0]).demand is None
        reg.add_cells("old", [make_cell("e" * 12, 1), make_cell("f" * 12, 2)],
                      demands={"f" * 12: given})
        assert reg.get_cell("old", "e" * 12).demand is None
        new = reg.add_cells("old", [make_cell(CELLS[1][0], 0), make_cell("e" * 12, 1),
                                    make_cell("f" * 12, 2)],
                            demands={CELLS[1][0]: given, "e" * 12: given, "f" * 12: other})
        assert new == []
        assert reg.get_cell("old", CELLS[1][0]).demand == given  # SQL NULL, filled
        assert reg.get_cell("old", "e" * 12).demand == given  # JSON null, filled
        assert reg.get_cell("old", "f" * 12).demand == given  # kept, not replaced
