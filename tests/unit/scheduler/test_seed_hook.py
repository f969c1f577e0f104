"""The seeds-on-demand hook over registry state made here (a real SQLite registry; cells
ended by hand with the fake backend's own final metrics): which rows get their next seed,
when they wait, and that a new hook (a restarted scheduler) decides the same and adds
nothing twice, whatever point an earlier one was killed at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kit.fake_trainer import sweep_final
from kit.home import register_backends

from orchestrator.analysis.seed_live import seed_state
from orchestrator.backends import get_backend
from orchestrator.grid.plan import SweepPlan
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.sweeps.seed_hook import SeedsHook
from orchestrator.sweeps.submission import prepare
from orchestrator.sweeps.sweep import Sweep

NAME = "seeds-hook"
SPEC = (f"name: {NAME}\nbackend: fake\nretries: {{retries}}\nbase: {{{{steps: 2}}}}\n"
        "axes:\n  baseline: [grpo, noisy]\n  reward_budget: [false, true]\n"
        "seeds: {{start: 2, max: 4, compare: {{reward_budget: false}}}}\n")


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Registry:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    register_backends(monkeypatch)
    return Registry.open()


def _submit(registry: Registry, tmp_path: Path, retries: int = 0) -> SweepPlan:
    """Record the sweep as a submit does (without MLflow): its plan and its first seeds."""
    spec = tmp_path / "seeds.yaml"
    spec.write_text(SPEC.format(retries=retries))
    prepared = prepare(spec)
    registry.upsert_sweep(NAME, backend="fake", spec_text=spec.read_text(),
                          plan=prepared.plan.to_json())
    Sweep(registry, NAME).record_cells(
        prepared.cells, {k: d.to_json() for k, d in prepared.demands.items()}, retries)
    return prepared.plan


def _hook(plan: SweepPlan) -> SeedsHook:
    """A new hook, as a (re)started scheduler builds it."""
    return SeedsHook(NAME, plan, get_backend("fake"),
                     lambda reg, cells, demands, retries:
                     Sweep(reg, NAME).record_cells(cells, demands, retries))


def _end(registry: Registry, cell: CellRecord, state: CellState = CellState.SUCCEEDED) -> None:
    """Run ``cell`` and end it in ``state`` (succeeded: with the fake trainer's metrics)."""
    assert registry.transition(cell, CellState.PENDING, CellState.QUEUED)
    assert registry.start_attempt(cell) is not None
    metrics = sweep_final(cell.settings) if state is CellState.SUCCEEDED else None
    assert registry.finish_attempt(cell, state, exit_code=0 if metrics else 1,
                                   final_metrics=metrics)


def _seeds(registry: Registry) -> dict[str, list[Any]]:
    """Per baseline, its cells' seeds (each value of reward_budget counted)."""
    out: dict[str, list[Any]] = {}
    for cell in registry.cells(NAME):
        out.setdefault(str(cell.axes["baseline"]), []).append(cell.axes["seed"])
    return {k: sorted(v) for k, v in out.items()}


def _end_all(registry: Registry) -> None:
    for cell in registry.cells(NAME, [CellState.PENDING]):
        _end(registry, cell)


def test_only_the_undecided_row_grows_and_a_restart_adds_nothing_twice(
        registry: Registry, tmp_path: Path) -> None:
    plan = _submit(registry, tmp_path)
    hook = _hook(plan)
    hook.on_pass(registry)
    assert _seeds(registry) == {"grpo": [0, 0, 1, 1], "noisy": [0, 0, 1, 1]}  # nothing ended
    _end_all(registry)
    hook.on_pass(registry)
    # grpo's +RB adds exactly 0.05 at every seed: decided at its first look; noisy is not.
    assert _seeds(registry) == {"grpo": [0, 0, 1, 1], "noisy": [0, 0, 1, 1, 2, 2]}
    new = [c for c in registry.cells(NAME) if c.axes["seed"] == 2]
    assert all(c.run_dir and (Path(c.run_dir) / "config.yaml").exists() for c in new)
    assert all(c.demand for c in new) and {c.index for c in new} == {2 * 8 + 4, 2 * 8 + 6}
    for again in (hook, _hook(plan)):  # the same scheduler's next pass, or a new one
        again.on_pass(registry)
        assert len(registry.cells(NAME)) == 10
    _end_all(registry)
    _hook(plan).on_pass(registry)
    _end_all(registry)
    _hook(plan).on_pass(registry)
    assert _seeds(registry) == {"grpo": [0, 0, 1, 1], "noisy": [0, 0, 1, 1, 2, 2, 3, 3]}


def test_a_row_waits_for_its_pairs_and_for_a_cancelled_cell(registry: Registry,
                                                            tmp_path: Path) -> None:
    plan = _submit(registry, tmp_path)
    cells = registry.cells(NAME)
    last = next(c for c in cells if c.axes["baseline"] == "noisy" and c.axes["seed"] == 1
                and c.axes["reward_budget"])
    for cell in cells:
        if cell is not last:
            _end(registry, cell)
    _hook(plan).on_pass(registry)
    assert len(registry.cells(NAME)) == 8  # noisy's seed 1 has not ended: no look yet
    assert registry.transition(last, CellState.PENDING, CellState.CANCELLED)
    _hook(plan).on_pass(registry)
    assert len(registry.cells(NAME)) == 8  # cancelled: waits for a resubmit to queue it


def test_a_cell_that_will_be_retried_holds_its_row_and_one_failed_for_good_does_not(
        registry: Registry, tmp_path: Path) -> None:
    plan = _submit(registry, tmp_path, retries=1)
    cells = registry.cells(NAME)
    grpo = next(c for c in cells if c.axes["baseline"] == "grpo" and c.axes["seed"] == 1
                and c.axes["reward_budget"])
    for cell in cells:
        _end(registry, cell, CellState.FAILED if cell is grpo else CellState.SUCCEEDED)
    _hook(plan).on_pass(registry)
    assert _seeds(registry)["grpo"] == [0, 0, 1, 1]  # a retry is to come
    registry.update_cell(grpo, max_retries=0)
    _hook(plan).on_pass(registry)
    # One pair left, fewer than start: the row wants a seed more.
    assert _seeds(registry)["grpo"] == [0, 0, 1, 1, 2, 2]


def test_a_row_whose_cells_fail_for_good_stops_after_start_failed_seeds(
        registry: Registry, tmp_path: Path) -> None:
    """Before, such a row (settings that always fail) got every seed up to ``max``."""
    plan = _submit(registry, tmp_path)

    def end_pending() -> None:
        for cell in registry.cells(NAME, [CellState.PENDING]):
            failing = cell.axes["baseline"] == "noisy" and cell.axes["reward_budget"]
            _end(registry, cell, CellState.FAILED if failing else CellState.SUCCEEDED)

    end_pending()
    _hook(plan).on_pass(registry)
    # noisy +RB failed at both seeds: start (2) failed seeds, so no seed 2 for its row.
    assert _seeds(registry) == {"grpo": [0, 0, 1, 1], "noisy": [0, 0, 1, 1]}
    state = seed_state(registry.cells(NAME), plan.seeds)  # type: ignore[arg-type]
    assert {r.row: r.done for r in state.rows} == {"baseline=grpo": True,
                                                   "baseline=noisy": True}


def test_one_failed_seed_below_start_still_gets_the_next(registry: Registry,
                                                          tmp_path: Path) -> None:
    plan = _submit(registry, tmp_path)
    for cell in registry.cells(NAME, [CellState.PENDING]):
        failing = (cell.axes["baseline"] == "noisy" and cell.axes["reward_budget"]
                   and cell.axes["seed"] == 0)
        _end(registry, cell, CellState.FAILED if failing else CellState.SUCCEEDED)
    _hook(plan).on_pass(registry)
    assert _seeds(registry)["noisy"] == [0, 0, 1, 1, 2, 2]


def test_the_stale_check_covers_the_seeds_the_rule_added(
        registry: Registry, tmp_path: Path) -> None:
    """Finished cells of seeds past ``start`` are the spec's too: a change of numerics
    finds them stale, not just the grid's first seeds."""
    from orchestrator.sweeps.seed_hook import reachable_ids
    from orchestrator.sweeps.staleness import stale_cells

    plan = _submit(registry, tmp_path)
    _end_all(registry)
    _hook(plan).on_pass(registry)
    _end_all(registry)
    added = {c.cell_id for c in registry.cells(NAME) if c.axes["seed"] == 2}
    assert len(added) == 2
    prepared = prepare(tmp_path / "seeds.yaml")
    backend = prepared.backend
    reachable = reachable_ids(backend, prepared.plan, prepared.cells)
    assert added <= reachable and len(reachable) == 16  # 4 rows' cells × 4 seeds
    # Ended here without provenance: every finished cell counts as stale.
    stale = stale_cells(registry, NAME, reachable, backend.numerics()).cell_ids
    assert added <= set(stale) and len(stale) == 10
    grid_only = {c.cell_id for c in prepared.cells}  # what the check covered before
    assert not added & set(stale_cells(registry, NAME, grid_only, backend.numerics()).cell_ids)
