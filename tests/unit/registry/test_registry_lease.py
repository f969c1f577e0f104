"""The scheduler lease in the registry (migration 0004), on SQLite and PostgreSQL.

Two "machines" are two claimants with different host ids: one takes the lease, the other
is refused and told who holds it; the holder renews and releases it; an expired lease
is taken over, after which the old owner can neither renew it nor write a cell (its
registry is fenced). A holder on this host whose process died is replaced at once. A
registry at revision 0003 with data is upgraded to 0004."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kit.cells import make_cells
from sqlalchemy import text

from orchestrator.errors import UserInputError
from orchestrator.registry import CellState, Registry
from orchestrator.registry.engine import make_engine
from orchestrator.registry.leases import Claimant, LeaseLost
from orchestrator.registry.schema import HEAD_REVISION, upgrade_schema
from orchestrator.scheduler.lease import SchedulerLease, SweepLockedError, holder_alive

A = Claimant("a" * 32, "machine-a", "host-a", 111)
B = Claimant("b" * 32, "machine-b", "host-b", 222)
SAFETY = 60.0  # seconds; a guard against hangs, never a speed assertion


def _wait_expired(registry: Registry, sweep: str) -> None:
    deadline = time.monotonic() + SAFETY
    while not (lease := registry.lease(sweep)) or not lease.expired:
        assert time.monotonic() < deadline, "the lease never expired"
        time.sleep(0.05)


def test_one_holder_at_a_time_renewed_and_released(registry: Registry) -> None:
    assert registry.lease("toy") is None
    taken, lease = registry.take_lease("toy", A, 60)
    assert taken and lease is not None and (lease.host, lease.pid) == ("machine-a", 111)
    taken, holder = registry.take_lease("toy", B, 60)
    assert not taken and holder is not None and holder.owner == A.owner
    assert "host machine-a pid 111 since" in holder.describe() and not holder.expired
    assert registry.take_lease("toy", A, 60)[0]  # already ours: taken again (renewed)
    assert registry.renew_lease("toy", A.owner, 60)
    assert not registry.renew_lease("toy", B.owner, 60)
    registry.upsert_sweep("other", backend="embedded", spec_text="name: other\n")
    assert registry.take_lease("other", B, 60)[0]  # other sweeps, other leases
    assert registry.release_lease("toy", A.owner)
    assert registry.lease("toy") is None
    assert registry.take_lease("toy", B, 60)[0]


def test_an_expired_lease_is_taken_over_and_fences_its_old_owner(registry: Registry) -> None:
    (cell,) = registry.add_cells("toy", make_cells(1))
    assert registry.take_lease("toy", A, 0.2)[0]
    old = registry.fenced(A.owner)
    assert old.transition(cell, CellState.PENDING, CellState.QUEUED)  # while it holds it
    _wait_expired(registry, "toy")
    assert registry.take_lease("toy", B, 60)[0]
    assert not registry.renew_lease("toy", A.owner, 60)
    with pytest.raises(LeaseLost, match="host machine-b pid 222"):
        old.transition(cell, CellState.QUEUED, CellState.RUNNING)
    with pytest.raises(LeaseLost):
        old.attach_job(cell, "local:x")
    assert registry.get_cell("toy", cell.cell_id).state is CellState.QUEUED  # nothing written
    assert not registry.release_lease("toy", A.owner)  # not theirs to release either
    new = registry.fenced(B.owner)
    assert new.transition(cell, CellState.QUEUED, CellState.RUNNING)
    assert registry.lease("toy").owner == B.owner  # type: ignore[union-attr]


def test_a_scheduler_lease_heartbeats_past_its_length(
        registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOST_ID", "host-a")
    with SchedulerLease(registry, "toy", seconds=1.5) as lease:
        first = registry.lease("toy")
        assert first is not None and first.pid == os.getpid()
        deadline = time.monotonic() + SAFETY
        # Wait for a renewal made after the first expiry would have come: only the
        # heartbeat kept the lease that long.
        while (now := registry.lease("toy")) is not None and now.heartbeat_at <= \
                first.expires_at:
            assert time.monotonic() < deadline, "the heartbeat never renewed the lease"
            time.sleep(0.05)
        assert now is not None and now.owner == lease.me.owner
        lease.check()
        taken, holder = registry.take_lease("toy", B, 60)
        assert not taken and holder is not None and holder.owner == lease.me.owner
        assert holder_alive(holder) is True
        with pytest.raises(SweepLockedError, match=f"pid {os.getpid()}"):
            SchedulerLease(registry, "toy").acquire()
    assert registry.lease("toy") is None  # released on a clean exit


def test_a_dead_holder_on_this_host_is_replaced_at_once(
        registry: Registry, registry_url: str) -> None:
    if registry.engine.dialect.name != "sqlite":
        pytest.skip("a host-local check: the registry's kind plays no part (SQLite covers it)")
    code = ("import sys\nfrom orchestrator.registry import Registry\n"
            "from orchestrator.scheduler.lease import SchedulerLease\n"
            f"SchedulerLease(Registry.open({registry_url!r}), 'toy', seconds=600).acquire()\n"
            "print('held', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(SweepLockedError, match=f"pid {holder.pid}"):
        SchedulerLease(registry, "toy").acquire()
    holder.kill()
    holder.wait(SAFETY)
    lease = registry.lease("toy")
    assert lease is not None and not lease.expired and holder_alive(lease) is False
    with SchedulerLease(registry, "toy") as mine:  # no need to wait 600 s
        assert registry.lease("toy").owner == mine.me.owner  # type: ignore[union-attr]


def test_lease_seconds_are_checked(registry: Registry,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_LEASE_SECONDS", "soon")
    with pytest.raises(UserInputError, match="KAPPA_LEASE_SECONDS"):
        SchedulerLease(registry, "toy")


def test_a_0003_registry_with_data_upgrades_to_0004(
        registry_url: str, tmp_path: Path) -> None:
    engine = make_engine(registry_url)
    upgrade_schema(engine, "0003_stop_reason")
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO sweeps (id, name, backend, spec_text, spec_hash, created_at,"
            " updated_at) VALUES (1, 'old', 'embedded', 'x', 'h', :t, :t)"),
            {"t": "2026-01-01 00:00:00"})
        conn.execute(text(
            "INSERT INTO cells (sweep_id, cell_id, cell_index, axes, settings, labels, state,"
            " attempts_count, max_retries, created_at, stop_reason) VALUES (1, 'abcdefabcdef',"
            " 0, '{}', '{}', '{}', 'running', 1, 2, :t, NULL)"), {"t": "2026-01-01 00:00:00"})
    with pytest.raises(UserInputError, match="older kappa"):
        Registry.open(registry_url)
    before, after = upgrade_schema(engine)
    engine.dispose()
    assert (before.current, after.current) == ("0003_stop_reason", HEAD_REVISION)
    with Registry.open(registry_url) as reg:
        assert reg.get_cell("old", "abcdef").state is CellState.RUNNING
        assert reg.executor("old") is None and reg.lease("old") is None
        reg.set_executor("old", "ray_jobs", {"address": "http://head:8265"})
        assert reg.executor("old") == ("ray_jobs", {"address": "http://head:8265"})
        assert reg.take_lease("old", A, 60)[0]
        assert reg.delete_sweep("old")  # the lease goes with its sweep


def test_status_views_show_the_holder_from_the_registry(registry: Registry) -> None:
    import io

    from rich.console import Console

    from orchestrator.cli.sweep_views import sweeps_table
    from orchestrator.sweeps.sweep import Sweep

    assert registry.take_lease("toy", A, 60)[0]
    registry.set_executor("toy", "ray_jobs", {"address": "http://u:***@head:8265"})
    sweep = Sweep.open(registry, "toy")
    out = io.StringIO()
    Console(file=out, width=200).print(sweeps_table([sweep.active_status()]))
    sweep.close()
    assert "machine-a pid 111" in out.getvalue()
    status = sweep.status()
    assert status.driver.text.startswith("scheduler on host machine-a pid 111 since")
    data = status.as_json()
    assert data["scheduler"]["host"] == "machine-a" and not data["scheduler"]["expired"]
    assert data["executor"] == {"name": "ray_jobs",
                                "options": {"address": "http://u:***@head:8265"}}


def test_a_fenced_write_frozen_in_its_transaction_does_not_hold_the_lease_forever(
        registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import select
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.orm import Session

    from orchestrator.registry.leases import check_fence
    from orchestrator.registry.models import SweepRow

    if registry.engine.dialect.name != "postgresql":
        pytest.skip("a frozen SQLite writer holds the whole database (documented limit)")
    monkeypatch.setenv("KAPPA_LEASE_SECONDS", "1")
    assert registry.take_lease("toy", A, 0.5)[0]
    with registry.engine.connect() as conn:
        sweep_id = conn.execute(select(SweepRow.id).where(SweepRow.name == "toy")).scalar_one()
    with Session(registry.engine) as frozen:  # share-locks the lease row, then freezes
        check_fence(frozen, sweep_id, A.owner)
        _wait_expired(registry, "toy")
        # Blocks on the frozen transaction's lock until the server ends it (it idled a
        # lease's length), then takes the expired lease.
        taken: list[bool] = []
        taker = threading.Thread(daemon=True, target=lambda: taken.append(
            registry.take_lease("toy", B, 60)[0]))
        taker.start()
        taker.join(SAFETY)
        assert taken == [True], "the frozen transaction kept the lease row locked"
        with pytest.raises(DBAPIError):
            frozen.execute(select(1))
