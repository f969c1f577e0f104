"""Two processes, one cell: compare-and-set lets exactly one win; a crash leaves nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from kit.cells import make_cells

from orchestrator.registry import AttemptState, CellState, Registry

CLAIM_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from orchestrator.registry import Registry
    url, ids = sys.argv[1], json.loads(sys.argv[2])
    reg = Registry.open(url)
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()  # the go signal: both processes start claiming together
    won = [i for i in ids if reg.transition(("toy", i), "pending", "queued", job_id=str(i))]
    print(json.dumps(won))
    """
)

# Kill the process (no cleanup, no rollback from Python) right before or right after a
# chosen statement, i.e. in the middle of the registry's transaction.
CRASH_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from sqlalchemy import event
    from orchestrator.registry import Registry
    from orchestrator.registry.states import CellState
    url, action, when, marker = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    reg = Registry.open(url)

    @event.listens_for(reg.engine, when + "_cursor_execute")
    def crash(conn, cursor, statement, parameters, context, executemany, *rest):
        if statement.lstrip().upper().startswith(marker):
            os._exit(9)

    if action == "start":
        reg.start_attempt(("toy", sys.argv[5]), job_id="j")
    elif action == "finish":
        reg.finish_attempt(("toy", sys.argv[5]), CellState.FAILED, exit_code=1)
    elif action == "add":
        from orchestrator.grid.identity import Cell
        reg.add_cells("toy", [Cell(i, f"new{i:09d}", {}, {}, {}) for i in range(5)])
    raise SystemExit("the crash point was never reached")
    """
)


def test_two_registries_race_for_the_same_cells(registry_url: str) -> None:
    first = Registry.open(registry_url)
    first.upsert_sweep("toy", backend="embedded", spec_text="")
    cells = first.add_cells("toy", make_cells(20))
    second = Registry.open(registry_url)
    barrier = threading.Barrier(2)

    def claim(reg: Registry) -> list[str]:
        barrier.wait()
        return [c.cell_id for c in cells if reg.transition(c, "pending", "queued")]

    try:
        with ThreadPoolExecutor(2) as pool:
            a, b = pool.map(claim, [first, second])
        assert set(a).isdisjoint(b)
        assert sorted(a + b) == sorted(c.cell_id for c in cells)
        assert first.counts("toy")[CellState.QUEUED] == 20
    finally:
        first.close()
        second.close()


@pytest.mark.slow
def test_two_processes_never_double_claim(registry_url: str) -> None:
    with Registry.open(registry_url) as reg:
        reg.upsert_sweep("toy", backend="embedded", spec_text="")
        ids = [c.cell_id for c in reg.add_cells("toy", make_cells(30))]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIM_SCRIPT, registry_url, json.dumps(ids)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        results.append(json.loads(out.strip().splitlines()[-1]))
    a, b = results
    assert set(a).isdisjoint(b)
    assert sorted(a + b) == sorted(ids)
    with Registry.open(registry_url) as reg:
        # Each winner's job id is the one stored: no write from the loser slipped in.
        assert all(c.job_id == c.cell_id for c in reg.cells("toy"))


def _crash(url: str, action: str, when: str, marker: str, *extra: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, url, action, when, marker, *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 9, result.stderr


def test_crash_inside_start_attempt_leaves_no_half_state(registry_url: str) -> None:
    with Registry.open(registry_url) as reg:
        reg.upsert_sweep("toy", backend="embedded", spec_text="")
        (cell,) = reg.add_cells("toy", make_cells(1))
        reg.transition(cell, "pending", "queued")
    # Dies after the cell row was updated to running, before its attempt row is written.
    _crash(registry_url, "start", "before", "INSERT INTO ATTEMPTS", cell.cell_id)
    with Registry.open(registry_url) as reg:
        after = reg.get_cell("toy", cell.cell_id)
        assert (after.state, after.attempts_count, after.started_at) == (CellState.QUEUED, 0, None)
        assert reg.attempts(cell) == []
        # Nothing is left locked: the next writer goes straight through.
        attempt = reg.start_attempt(cell, job_id="again")
        assert attempt is not None and attempt.number == 1


def test_crash_inside_finish_attempt_leaves_no_half_state(registry_url: str) -> None:
    with Registry.open(registry_url) as reg:
        reg.upsert_sweep("toy", backend="embedded", spec_text="")
        (cell,) = reg.add_cells("toy", make_cells(1))
        reg.transition(cell, "pending", "queued")
        reg.start_attempt(cell)
    _crash(registry_url, "finish", "before", "UPDATE ATTEMPTS", cell.cell_id)
    with Registry.open(registry_url) as reg:
        after = reg.get_cell("toy", cell.cell_id)
        assert (after.state, after.finished_at, after.exit_code) == (CellState.RUNNING, None, None)
        assert [a.state for a in reg.attempts(cell)] == [AttemptState.RUNNING]


def test_crash_inside_add_cells_adds_none(registry_url: str) -> None:
    with Registry.open(registry_url) as reg:
        reg.upsert_sweep("toy", backend="embedded", spec_text="")
    # Dies right after the cell rows were inserted, before the commit.
    _crash(registry_url, "add", "after", "INSERT INTO CELLS")
    with Registry.open(registry_url) as reg:
        assert reg.cells("toy") == []
        assert len(reg.add_cells("toy", make_cells(2))) == 2
