"""The registry and the scheduler at up to 100,000 cells: how each read grows, SQLite and
PostgreSQL side by side.

    .venv/bin/python bench/registry_scale.py [--sizes 1000 10000 100000] [--quick]

For each database and size N, on a fresh database holding one sweep of N cells (each
with ~1 KB of settings, like a verl cell's), it times what a user and the scheduler do
against it:

* ``status``      ``kappa status SWEEP``'s code path (``print_status`` to a console that
                  discards its output): counts, every cell, hours, the cells table;
* ``status json`` ``kappa status SWEEP --json`` (``SweepStatus.as_json``);
* ``list``        ``kappa status`` without a sweep (the sweeps table);
* ``stale check`` what ``kappa plan`` and ``submit`` read of a recorded sweep: which of
                  its succeeded cells other numerics made (``stale_cells``);
* ``resume scan`` what ``kappa resume`` reads before it launches anything: the fit of
                  every waiting cell (``check_fit``) and ``SweepScheduler.recover``
                  (queued, running, failed and ended cells);
* ``pass``        one ``SweepScheduler.step`` on a full cluster (64 cells running on the
                  simulated cluster of ``bench/_sim_cluster.py``, the rest pending), after
                  a first pass has judged every cell's demand once; ``first pass`` is that
                  first one;
* ``loop check``  the loop's test, after each pass, whether anything is left to do;
* ``pass before``, ``check before``: what the pass and the check read before they were
                  changed to read ids and counts only (every pending cell, settings and
                  all), for comparison.

For status and resume the sweep is mid-way (half its cells succeeded, 64 running, the
rest pending); for the passes all but the running ones are pending, the most a pass can
face. Prints seconds (best of ``--repeat``) and the ratio between consecutive sizes
(≈10 for a tenfold size: linear; ≈1: independent of size). PostgreSQL needs
initdb/pg_ctl (``make sysdeps``); without them only SQLite runs.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "unit" / "registry"))

from _sim_cluster import (  # noqa: E402
    SPEC_TEXT,
    SimBackend,
    SimCell,
    SimCluster,
    add_sim_cells,
    kappa_home,
    plan_json,
)

from orchestrator.executors.base import JobResources  # noqa: E402
from orchestrator.registry import CellState, Registry  # noqa: E402

SWEEP = "scale"
RUNNING = 64
OPS = ("status", "status json", "list", "stale check", "resume scan", "first pass", "pass",
       "pass before", "loop check", "check before")
# The rest of a cell's settings, as a verl cell carries them (~1 KB of JSON).
CONFIG: dict[str, str | int | float | bool] = {
    **{f"actor_rollout_ref.actor.opt_{i}": 0.001 * i for i in range(12)},
    **{f"data.option_{i}": f"/data/shared/datasets/gsm8k/part-{i:03d}.parquet" for i in range(8)},
    **{f"trainer.flag_{i}": bool(i % 2) for i in range(10)},
    "actor_rollout_ref.model.path": "Qwen/Qwen2.5-7B-Instruct",
}


def make_cells(n: int) -> list[SimCell]:
    """``n`` simulated cells of 1 GPU with a realistic amount of settings."""
    return [SimCell(f"{i:012x}", i, {"seed": i},
                    {"gpus": 1, "max_steps": 200, "sim_seconds": 7200.0, "seed": i,
                     "config": CONFIG}) for i in range(n)]


def populate(registry: Registry, n: int, cluster: SimCluster, run_root: Path) -> None:
    """One sweep of ``n`` cells: ``RUNNING`` of them running on ``cluster``, the rest
    pending (moved to succeeded/pending by :func:`set_mix`)."""
    registry.upsert_sweep(SWEEP, backend=SimBackend.name, spec_text=SPEC_TEXT,
                          plan=plan_json(SWEEP))
    cells = add_sim_cells(registry, SWEEP, make_cells(n))
    for cell in cells[:RUNNING]:
        registry.transition(cell, CellState.PENDING, CellState.QUEUED)
        run_dir = run_root / cell.cell_id
        registry.transition(cell, CellState.QUEUED, CellState.RUNNING, run_dir=str(run_dir))
        job = cluster.submit(("simulated-cell", "1e9", "200"), {}, run_dir, run_dir / "train.log",
                             JobResources(gpus=1))
        registry.attach_job(cell, job.job_id)


def set_mix(registry: Registry, half_done: bool) -> None:
    """Half the not-running cells succeeded (status, resume) or all pending (a pass)."""
    from sqlalchemy import text

    with registry.engine.begin() as conn:
        conn.execute(text("UPDATE cells SET state='pending', final_metrics=NULL, "
                          "started_at=NULL, finished_at=NULL WHERE state='succeeded'"))
        if half_done:
            conn.execute(text(
                "UPDATE cells SET state='succeeded', attempts_count=1, "
                "final_metrics=:metrics, started_at=created_at, finished_at=created_at "
                "WHERE state='pending' AND cell_index % 2 = 0"),
                {"metrics": json.dumps({"val-core/gsm8k/acc/mean@1": 0.5,
                                        "eval/gsm8k/mean@4": 0.4})})


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """The fastest of ``repeat`` runs of ``fn``: (wall seconds, CPU seconds of this
    process). CPU is what to compare for SQLite on a busy machine (the database works
    inside this process); PostgreSQL's server works outside it, so wall time there."""
    runs = []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    return min(runs)


def measure(url: str, n: int, repeat: int) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds per operation on a fresh database at ``url`` with ``n`` cells."""
    from rich.console import Console

    from orchestrator.cli.sweep_views import print_status, sweeps_table
    from orchestrator.scheduler.hooks import NullTracker
    from orchestrator.scheduler.loop import SweepScheduler
    from orchestrator.scheduler.options import SchedulerOptions
    from orchestrator.scheduler.order import LaunchOrder, check_fit, stored_demand
    from orchestrator.spec.model import Resources
    from orchestrator.sweeps.driver import build_scheduler
    from orchestrator.sweeps.staleness import stale_cells
    from orchestrator.sweeps.sweep import Sweep

    out: dict[str, tuple[float, float]] = {}
    backend = SimBackend()
    resources = Resources(gpus=1, hours=2.0)
    with tempfile.TemporaryDirectory(prefix="kappa-scale-") as tmp, kappa_home(Path(tmp)), \
            Registry.open(url) as registry:
        cluster = SimCluster([8] * 8)
        runs = Path(tmp) / "runs" / SWEEP
        out["add"] = best(lambda: populate(registry, n, cluster, runs), 1)
        set_mix(registry, half_done=True)
        record = registry.get_sweep(SWEEP)

        def status() -> None:
            console = Console(file=io.StringIO(), width=160)
            print_status(console, Sweep(registry, SWEEP, record).status())

        def listing() -> None:
            statuses = []
            for handle in Sweep.every(registry):
                statuses.append(handle.active_status())
                handle.close()
            Console(file=io.StringIO()).print(sweeps_table(statuses))

        out["status"] = best(status, repeat)
        out["status json"] = best(lambda: Sweep(registry, SWEEP, record).status().as_json(),
                                  repeat)
        out["list"] = best(listing, repeat)
        ids = {cell_id for cell_id, _ in registry.cell_keys(SWEEP)}
        out["stale check"] = best(lambda: stale_cells(registry, SWEEP, ids, backend.numerics()),
                                  repeat)

        def resume_scan() -> None:
            waiting = registry.cells(SWEEP, [CellState.PENDING, CellState.QUEUED])
            check_fit(((c.cell_id, stored_demand(c)) for c in waiting), cluster, resources)
            SweepScheduler(registry, SWEEP, backend, cluster, NullTracker()).recover()

        out["resume scan"] = best(resume_scan, repeat)
        set_mix(registry, half_done=False)
        options = SchedulerOptions(poll_interval=3600.0)
        scheduler = build_scheduler(registry, registry.get_sweep(SWEEP), backend, cluster,
                                    NullTracker(), options)
        scheduler.recover()  # reattaches the running jobs: the cluster is full
        out["first pass"] = best(scheduler.step, 1)
        out["pass"] = best(scheduler.step, repeat)
        # What a pass read before it read ids only: every pending cell, settings and all.
        out["pass before"] = best(lambda: LaunchOrder().sort(
            registry.cells(SWEEP, [CellState.PENDING])), repeat)
        out["loop check"] = best(lambda: registry.counts(SWEEP), repeat)
        out["check before"] = best(lambda: registry.cells(
            SWEEP, [CellState.PENDING, CellState.QUEUED]), repeat)
        counts = registry.counts(SWEEP)
        assert counts[CellState.RUNNING] == RUNNING, counts
    return out


def main() -> None:
    """Measure every size on each database; print the table and the growth ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--db", action="append", choices=("sqlite", "postgres"))
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 cells only")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    sizes = [1000, 10_000] if args.quick else sorted(args.sizes)
    dbs = args.db or ["sqlite", "postgres"]
    results: dict[str, dict[int, dict[str, tuple[float, float]]]] = {}
    if "sqlite" in dbs:
        results["sqlite"] = {}
        for n in sizes:
            with tempfile.TemporaryDirectory() as tmp:
                results["sqlite"][n] = measure(f"sqlite:///{tmp}/registry.db", n, args.repeat)
            print(f"sqlite {n:,} cells: {results['sqlite'][n]}", flush=True)
    if "postgres" in dbs:
        from kappa_pg_server import PgServer, unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            print(f"postgres skipped: {reason}")
        else:
            server = PgServer().start()
            results["postgres"] = {}
            try:
                for n in sizes:
                    url = server.create_database()
                    results["postgres"][n] = measure(url, n, args.repeat)
                    server.drop_database(url)
                    print(f"postgres {n:,} cells: {results['postgres'][n]}", flush=True)
            except Exception:
                log = server.base / "server.log"
                print(log.read_text()[-3000:] if log.exists() else "(no server log)")
                raise
            finally:
                server.stop()
    print_table(results, sizes)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def print_table(results: dict[str, dict[int, dict[str, tuple[float, float]]]],
                sizes: list[int]) -> None:
    """Seconds per operation and size (CPU for SQLite, wall for PostgreSQL), and each
    step's growth ratio."""
    head = "".join(f"{n:>11,}" for n in sizes)
    growth = "".join(f"{f'×{b // a}':>9}" for a, b in pairwise(sizes))
    for db, by_size in results.items():
        kind = 1 if db == "sqlite" else 0
        print(f"\n{db}: {('wall', 'CPU')[kind]} s (cells →){head}   growth{growth}")
        for op in ("add", *OPS):
            row = [by_size[n][op][kind] for n in sizes]
            ratios = "".join(f"{b / a:>9.1f}" for a, b in pairwise(row))
            print(f"  {op:<16}" + "".join(f"{t:>11.3f}" for t in row) + f"         {ratios}")


if __name__ == "__main__":
    main()
