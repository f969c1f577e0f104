"""The plan stored per sweep (migration 0005): written at submit, read back equal, and
made at upgrade time for the sweeps an older registry holds (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit.cells import make_cell
from kit.cli import run_kappa
from sqlalchemy import text

from orchestrator.errors import UserInputError
from orchestrator.grid.plan import SweepPlan, parse_plan, stored_plan
from orchestrator.registry import Registry
from orchestrator.registry.engine import make_engine
from orchestrator.registry.schema import HEAD_REVISION, upgrade_schema
from orchestrator.spec.stop_block import StopRules

SPEC = "name: old\nbackend: embedded\naxes:\n  seed: [0, 1]\nresources: {gpus: 1}\n" \
       "stop: {gpu_hours: 3}\n"


def test_the_plan_is_stored_with_the_sweep(registry: Registry) -> None:
    plan = SweepPlan(name="toy", backend="embedded", cell_count=2, stop=StopRules(gpu_hours=4))
    registry.upsert_sweep("toy", backend="embedded", spec_text="name: toy\n",
                          plan=plan.to_json())
    assert stored_plan("toy", registry.get_sweep("toy").plan) == plan
    # An update that brings no plan keeps the stored one.
    registry.upsert_sweep("toy", backend="embedded", spec_text="name: toy\n")
    assert stored_plan("toy", registry.get_sweep("toy").plan) == plan


def test_upgrading_a_0004_registry_plans_its_sweeps(registry_url: str) -> None:
    engine = make_engine(registry_url)
    upgrade_schema(engine, "0004_scheduler_lease")
    rows = [(1, "old", SPEC), (2, "old.canary", SPEC), (3, "gone", "name: gone\nbackend: nope\n")]
    with engine.begin() as conn:
        for sweep_id, name, spec_text in rows:
            conn.execute(text(
                "INSERT INTO sweeps (id, name, backend, spec_text, spec_hash, created_at,"
                " updated_at) VALUES (:id, :name, 'embedded', :spec, 'h', :t, :t)"),
                {"id": sweep_id, "name": name, "spec": spec_text, "t": "2026-01-01 00:00:00"})
    before, after = upgrade_schema(engine)
    engine.dispose()
    assert (before.current, after.current) == ("0004_scheduler_lease", HEAD_REVISION)
    with Registry.open(registry_url) as reg:
        plan = stored_plan("old", reg.get_sweep("old").plan)
        assert plan == parse_plan(SPEC).sweep_plan()
        assert plan.stop is not None and plan.stop.gpu_hours == 3 and plan.cell_count == 2
        canary = stored_plan("old.canary", reg.get_sweep("old.canary").plan)
        assert (canary.name, canary.retries, canary.stop) == ("old.canary", 0, plan.stop)
        # A spec that no longer plans: reading its sweep says so and how to fix it.
        assert reg.get_sweep("gone").plan is None
        with pytest.raises(UserInputError, match="sweep gone has no stored plan") as info:
            stored_plan("gone", reg.get_sweep("gone").plan)
        assert "kappa submit" in (info.value.problems[0].fix or "")


def test_a_corrupt_stored_plan_stops_status_and_resume_with_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A stop block that no longer validates is never read as 'no rules': the sweep's
    GPU-hours cap must not vanish without a word."""
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    plan = SweepPlan(name="capped", backend="embedded", stop=StopRules(gpu_hours=4))
    with Registry.open() as reg:
        reg.upsert_sweep("capped", backend="embedded", spec_text="name: capped\n",
                         plan=plan.to_json().replace('"gpu_hours":4.0', '"gpu_hours":-1'))
        reg.add_cells("capped", [make_cell("c0ffee", 0, axes={"seed": 0})])
    for args in (["status", "capped"], ["resume", "capped", "--wait"]):
        ran = run_kappa(capsys, *args)
        assert ran.code == 2, ran.output
        assert "stored plan of sweep capped cannot be read" in ran.output
        assert "stop.gpu_hours" in ran.output and "kappa submit" in ran.output
    with Registry.open() as reg:  # nothing was started
        assert reg.get_cell("capped", "c0ffee").attempts_count == 0
