"""Registry throughput: SQLite (default) vs PostgreSQL, side by side in one run.

For each backend, on a fresh database:

* ``add``    register a sweep of N cells (one ``add_cells`` call, one transaction);
* ``life``   move M cells through pending -> queued -> running -> succeeded (4
             compare-and-set transactions per cell, attempts included);
* ``race``   two threads claim the same M cells (pending -> queued); checks no cell is
             claimed twice.

Prints cells/second per step and the ratio PostgreSQL/SQLite (>1: PostgreSQL faster).
PostgreSQL needs initdb/pg_ctl (``make sysdeps``); without them only SQLite runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "unit" / "registry"))

from orchestrator.registry import CellState, Registry  # noqa: E402


@dataclass(frozen=True)
class Cell:
    cell_id: str
    index: int
    axes: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, Any] = field(default_factory=dict)


def cells(n: int) -> list[Cell]:
    """``n`` cells with realistic-size settings."""
    return [
        Cell(
            f"{i:012x}",
            i,
            {"algorithm": "grpo", "seed": i},
            {
                "algorithm": {"name": "grpo", "clip": [0.2, 0.28]},
                "seed": i,
                "model": {"hidden": 64, "layers": 2},
                "steps": 200,
            },
        )
        for i in range(n)
    ]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_backend(url: str, n_add: int, n_life: int) -> dict[str, float]:
    """Cells per second for each step on the registry at ``url``."""
    with Registry.open(url) as reg:
        reg.upsert_sweep("bench", backend="embedded", spec_text="")
        add_s = timed(lambda: reg.add_cells("bench", cells(n_add)))
        life = reg.cells("bench")[:n_life]

        def full_life() -> None:
            for c in life:
                reg.transition(c, CellState.PENDING, CellState.QUEUED)
                reg.start_attempt(c, job_id="j")
                reg.update_progress(c, 1, 1)
                reg.finish_attempt(c, CellState.SUCCEEDED, exit_code=0)

        life_s = timed(full_life)
        race_cells = reg.cells("bench", [CellState.PENDING])[:n_life]
    regs = [Registry.open(url), Registry.open(url)]
    barrier = threading.Barrier(2)

    def claim(r: Registry) -> list[str]:
        barrier.wait()
        return [c.cell_id for c in race_cells if r.transition(c, "pending", "queued")]

    start = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(claim, regs)
    race_s = time.perf_counter() - start
    for r in regs:
        r.close()
    assert set(a).isdisjoint(b) and len(a) + len(b) == len(race_cells), "double claim!"
    return {"add": n_add / add_s, "life": n_life / life_s, "race": len(race_cells) / race_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=5000, help="cells registered (add)")
    parser.add_argument("--life", type=int, default=300, help="cells moved through a life")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["sqlite"] = run_backend(f"sqlite:///{tmp}/registry.db", args.cells, args.life)
    from kappa_pg_server import PgServer, unavailable_reason

    reason = unavailable_reason()
    if reason is None:
        server = PgServer().start()
        try:
            results["postgres"] = run_backend(server.create_database(), args.cells, args.life)
        finally:
            server.stop()
    else:
        print(f"postgres skipped: {reason}")

    print(f"{'step':<6} {'sqlite cells/s':>15} {'postgres cells/s':>17} {'pg/sqlite':>10}")
    for step in ("add", "life", "race"):
        lite = results["sqlite"][step]
        pg = results.get("postgres", {}).get(step)
        pg_text = f"{pg:17.0f}" if pg else f"{'-':>17}"
        ratio = f"{pg / lite:10.2f}" if pg else f"{'-':>10}"
        print(f"{step:<6} {lite:15.0f} {pg_text} {ratio}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
