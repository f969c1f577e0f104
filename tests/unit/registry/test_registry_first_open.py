"""Four (slow: eight) processes open one fresh registry at the same moment: one creates the schema,
the others wait for it; nobody fails, and the sweep lock lets one recorder in at a time."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from orchestrator.registry import Registry, SchemaState
from orchestrator.registry.engine import make_engine
from orchestrator.registry.schema import schema_status
from orchestrator.registry.sweeps import advisory_key, sqlite_lock_path, sweep_record_lock

SAFETY = 240  # seconds; a guard against hangs, not a speed assertion

# Each process imports everything, says it is ready, then opens the registry as soon as
# the go file appears (all of them within a few milliseconds).
OPEN_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from orchestrator.registry import Registry
    url, go, me = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    Path(str(go) + "." + me).touch()
    while not go.exists():
        time.sleep(0.002)
    with Registry.open(url) as reg:
        reg.upsert_sweep("s" + me, backend="embedded", spec_text=me)
        print(len(reg.list_sweeps()))
    """
)


def _start_together(argv_of: list[list[str]], go: Path) -> list[subprocess.Popen[str]]:
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for argv in argv_of]
    deadline = time.monotonic() + SAFETY
    while sum(Path(f"{go}.{i}").exists() for i in range(len(procs))) < len(procs):
        assert time.monotonic() < deadline, "the processes never got ready"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.02)
    go.touch()
    return procs


@pytest.mark.parametrize("processes", [4, pytest.param(8, marks=pytest.mark.slow)])
def test_processes_open_a_fresh_registry_at_once(
        registry_url: str, tmp_path: Path, processes: int) -> None:
    go = tmp_path / "go"
    procs = _start_together(
        [[sys.executable, "-c", OPEN_SCRIPT, registry_url, str(go), str(i)]
         for i in range(processes)], go)
    for proc in procs:
        _, err = proc.communicate(timeout=SAFETY)
        assert proc.returncode == 0 and "Traceback" not in err, err
    engine = make_engine(registry_url)
    try:
        assert schema_status(engine).state is SchemaState.CURRENT
    finally:
        engine.dispose()
    with Registry.open(registry_url) as reg:
        assert sorted(s.name for s in reg.list_sweeps()) == sorted(
            f"s{i}" for i in range(processes))


def test_sweep_record_lock_excludes_a_second_holder(registry_url: str) -> None:
    """While one connection records sweep ``a``, another waits; ``b`` on PostgreSQL
    (a lock per sweep) does not."""
    first, second = Registry.open(registry_url), Registry.open(registry_url)
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def hold() -> None:
        with sweep_record_lock(first.engine, "a"):
            order.append("first in")
            inside.set()
            release.wait(SAFETY)
            order.append("first out")

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert inside.wait(SAFETY)
        waiter = threading.Thread(target=lambda: _enter(second, "a", order))
        waiter.start()
        if first.engine.dialect.name == "postgresql":
            with sweep_record_lock(second.engine, "b"):  # another sweep: not blocked
                order.append("b")
            _wait_for_pg_waiter(second, advisory_key("a"))
        else:
            path = sqlite_lock_path(second.engine)
            assert path is not None
            fd = os.open(path, os.O_RDWR)
            try:
                with pytest.raises(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(fd)
        release.set()
        waiter.join(SAFETY)
        holder.join(SAFETY)
        assert [o for o in order if o != "b"] == ["first in", "first out", "second in"]
    finally:
        release.set()
        first.close()
        second.close()


def _enter(reg: Registry, sweep: str, order: list[str]) -> None:
    with sweep_record_lock(reg.engine, sweep):
        order.append("second in")


def _wait_for_pg_waiter(reg: Registry, key: int) -> None:
    """Until a session is seen waiting for the advisory lock ``key``."""
    deadline = time.monotonic() + SAFETY
    query = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                 "AND ((classid::bigint << 32) | objid::bigint) = :key")
    with reg.engine.connect() as conn:
        while not conn.execute(query, {"key": key}).scalar():
            assert time.monotonic() < deadline, "the second session never waited"
            time.sleep(0.02)
            conn.rollback()
