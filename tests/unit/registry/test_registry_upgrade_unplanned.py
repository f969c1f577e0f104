"""Upgrading a registry whose stored spec no longer plans (migration 0005): the upgrade
says which setting is wrong, and the sweep's verbs then exit 2 naming it, not a crash."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kit.cli import run_kappa
from old_registry import old_registry
from sqlalchemy import text

from orchestrator.registry import Registry
from orchestrator.registry.engine import make_engine
from orchestrator.registry.schema import HEAD_REVISION, upgrade_schema

#: What an older kappa stored, edited since (a misspelt setting): it no longer plans.
BROKEN = "name: old\nbackend: embedded\nbase: {max_stepz: 3}\naxes:\n  seed: [0]\n"


def _old_registry(url: str) -> None:
    """A 0004 registry with sweep ``old`` (spec :data:`BROKEN`) and one succeeded cell."""
    old_registry(url, BROKEN, [("c0ffee000000", {"seed": 0})], state="succeeded")


def test_the_upgrade_names_what_no_longer_plans(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    _old_registry(url)
    engine = make_engine(url)
    with caplog.at_level(logging.WARNING):
        before, after = upgrade_schema(engine)
    engine.dispose()
    assert (before.current, after.current) == ("0004_scheduler_lease", HEAD_REVISION)
    warned = " ".join(r.getMessage() for r in caplog.records)
    # The problem itself, not only "invalid settings (1 problem(s)):".
    assert "sweep old" in warned and "base.max_stepz" in warned, warned
    with Registry.open(url) as reg:
        assert reg.get_sweep("old").plan is None
        assert reg.get_cell("old", "c0ffee000000").demand is not None


def test_an_unplanned_sweep_is_exit_2_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    _old_registry(url)
    upgraded = run_kappa(capsys, "db", "upgrade")
    assert upgraded.code == 0, upgraded.output
    for args in (["status", "old"], ["resume", "old", "--wait"], ["export", "old"],
                 ["report", "old", "-o", str(tmp_path / "report.html")]):
        ran = run_kappa(capsys, *args)
        assert ran.code == 2, (args, ran.output)
        assert "sweep old has no stored plan" in ran.output, ran.output
        assert "kappa submit" in ran.output and "Traceback" not in ran.output
    with Registry.open(url) as reg:  # nothing was started or changed
        cell = reg.get_cell("old", "c0ffee000000")
        assert (cell.state.value, cell.attempts_count) == ("succeeded", 1)


def test_the_upgrade_waits_for_a_running_scheduler(registry_url: str) -> None:
    """An older scheduler still running would record search trials without a demand
    after the upgrade (their launches would fail): the upgrade refuses while a lease is
    held, and goes ahead once it has expired (a scheduler killed, not released)."""
    from orchestrator.errors import UserInputError

    old_registry(registry_url, "name: old\n", [])
    engine = make_engine(registry_url)
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO sweep_leases (sweep_id, owner, host, pid, lease_seconds, expires_at)"
            " VALUES (1, 'u-1', 'h1', 42, 30, :until)"), {"until": "2999-01-01 00:00:00"})
    with pytest.raises(UserInputError, match="while a scheduler runs") as info:
        upgrade_schema(engine)
    assert "old (host h1 pid 42)" in (info.value.problems[0].found or "")
    with engine.begin() as conn:  # killed long ago: its lease expired
        conn.execute(text("UPDATE sweep_leases SET expires_at = :t"),
                     {"t": "2026-01-01 00:00:00"})
    before, after = upgrade_schema(engine)
    engine.dispose()
    assert (before.current, after.current) == ("0004_scheduler_lease", HEAD_REVISION)
