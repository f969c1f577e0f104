"""Per-cell orchestration overhead: kappa's local executor (and scheduler) vs Ray Tune.

Side by side, in one run, on the same N trivial cells with the same parallelism:

* ``direct``       N trivial processes (``python -c pass``) started with bare
                   ``subprocess.Popen``: the floor every process-based runner pays.
* ``kappa-exec``   the same N processes through :class:`LocalExecutor` (wrapper, session,
                   job files, slots).
* ``kappa-sweep``  N cells of a spec through the full ``submit --wait`` path (spec, grid,
                   registry, MLflow parent/child runs, run folders) with a trivial
                   backend whose launch is ``python -c pass``.
* ``ray-tune``     N trials of a trivial function through ``ray.tune.Tuner`` (the trial
                   runs in a warm worker, no process start); ``ray.init`` not counted.

Overhead per cell = (wall - direct wall) / N for the process-based runners and wall / N
for Ray Tune (whose payload is free). Prints a table and the ratios; ``--json`` saves them.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRIVIAL = (sys.executable, "-I", "-S", "-c", "pass")


def bench_direct(n: int, parallel: int) -> float:
    """Wall seconds for n trivial processes, ``parallel`` at a time, with bare Popen."""
    start = time.perf_counter()
    running: list[subprocess.Popen[bytes]] = []
    launched = 0
    while launched < n or running:
        while launched < n and len(running) < parallel:
            running.append(subprocess.Popen(TRIVIAL))
            launched += 1
        running[0].wait()
        running = [p for p in running if p.poll() is None]
    return time.perf_counter() - start


def bench_executor(n: int, parallel: int, workdir: Path) -> float:
    """Wall seconds for n trivial processes through kappa's LocalExecutor."""
    from orchestrator.executors.local import LocalExecutor, LocalJob

    ex = LocalExecutor(max_parallel=parallel)
    start = time.perf_counter()
    running: list[LocalJob] = []
    launched = 0
    while launched < n or running:
        while launched < n and ex.capacity() > 0:
            cell = workdir / f"cell{launched}"
            running.append(ex.submit(TRIVIAL, {}, workdir, cell / "train.log"))
            launched += 1
        running[0].wait()
        running = [job for job in running if job.poll() is None]
    return time.perf_counter() - start


class TrivialBackend:
    """A backend whose cells are ``python -c pass`` (the benchmark's trivial cell).

    Defined here and registered under ``trivial`` for the run; it subclasses the real
    :class:`~orchestrator.backends.Backend` when first imported (see ``_backend_class``).
    """


def _backend_class() -> type:
    from pydantic import BaseModel, ConfigDict

    from orchestrator.backends.base import Backend, Demand, LaunchSpec

    class TrivialSettings(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        i: int = 0

    class Trivial(Backend):
        name = "trivial"
        settings_model = TrivialSettings

        def launch(self, settings: Mapping[str, Any], run_dir: Path,
                   demand: Demand) -> LaunchSpec:
            return LaunchSpec(argv=TRIVIAL)

        def read_summary(self, run_dir: Path) -> dict[str, object] | None:
            return {"status": "succeeded", "final": {}}  # ``pass`` writes no summary.json

    return Trivial


def bench_sweep(n: int, parallel: int, workdir: Path) -> float:
    """Wall seconds for ``submit(wait=True)`` of an n-cell spec of trivial cells: spec,
    grid, registry (SQLite), MLflow parent + child runs, run folders, scheduler loop."""
    import orchestrator.backends as backends
    from orchestrator.sweeps.driver import submit

    os.environ["KAPPA_HOME"] = str(workdir / "home")
    os.environ.setdefault("KAPPA_POLL_INTERVAL", "0.01")
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    globals()["TrivialBackend"] = _backend_class()
    sys.modules.setdefault("kappa_bench_overhead", sys.modules[__name__])
    backends.BACKENDS["trivial"] = "kappa_bench_overhead:TrivialBackend"
    spec = workdir / "trivial.yaml"
    workdir.mkdir(parents=True, exist_ok=True)
    spec.write_text(f"name: trivial\nbackend: trivial\naxes:\n  i: {list(range(n))}\n")
    # Create the MLflow store first: its one-off schema migration is not per-cell cost.
    from orchestrator.tracking import Tracker

    Tracker().client.search_experiments()
    start = time.perf_counter()
    submit(spec, wait=True, max_parallel=parallel)
    return time.perf_counter() - start


def _trivial_trial(config: dict[str, int]) -> dict[str, int]:
    return {"score": config["i"]}


def bench_ray_tune(n: int, parallel: int, workdir: Path) -> float | None:
    """Wall seconds for ``Tuner.fit()`` of n trivial trials (``ray.init`` excluded)."""
    try:
        import ray
        from ray import tune
    except ImportError:
        return None
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    ray.init(num_cpus=parallel, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR)
    try:
        tuner = tune.Tuner(
            tune.with_resources(_trivial_trial, {"cpu": 1}),
            param_space={"i": tune.grid_search(list(range(n)))},
            tune_config=tune.TuneConfig(max_concurrent_trials=parallel),
            run_config=tune.RunConfig(storage_path=str(workdir / "ray"), verbose=0),
        )
        start = time.perf_counter()
        results = tuner.fit()
        wall = time.perf_counter() - start
        assert len(results) == n and not results.errors
        return wall
    finally:
        ray.shutdown()


def main() -> None:
    """Run every runner on the same cells and print per-cell overhead and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", type=int, default=60)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    n, parallel = args.cells, args.parallel

    with tempfile.TemporaryDirectory(prefix="kappa-bench-") as tmp:
        work = Path(tmp)
        runners: dict[str, Callable[[], float | None]] = {
            "direct": lambda: bench_direct(n, parallel),
            "kappa-exec": lambda: bench_executor(n, parallel, work / "exec"),
            "kappa-sweep": lambda: bench_sweep(n, parallel, work / "sweep"),
        }
        if not args.skip_ray:
            runners["ray-tune"] = lambda: bench_ray_tune(n, parallel, work)
        walls: dict[str, float] = {}
        for name, run in runners.items():
            wall = run()
            if wall is not None:
                walls[name] = wall

    floor = walls["direct"]
    overhead = {name: (wall / n if name == "ray-tune" else max(wall - floor, 0.0) / n)
                for name, wall in walls.items() if name != "direct"}
    print(f"{n} trivial cells, {parallel} at a time (os.cpu_count()={os.cpu_count()})")
    print(f"{'runner':<12} {'wall s':>8} {'wall/cell ms':>13} {'overhead/cell ms':>17}")
    for name, wall in walls.items():
        extra = f"{overhead[name] * 1e3:17.2f}" if name in overhead else f"{'(floor)':>17}"
        print(f"{name:<12} {wall:8.2f} {wall / n * 1e3:13.2f} {extra}")
    ratios: dict[str, float] = {}
    if "ray-tune" in walls:
        for name in ("kappa-exec", "kappa-sweep"):
            if name in walls:
                ratios[f"ray-tune/{name} wall per cell"] = walls["ray-tune"] / walls[name]
                ratios[f"ray-tune/{name} overhead per cell"] = (
                    overhead["ray-tune"] / max(overhead[name], 1e-6))
    for label, ratio in ratios.items():
        print(f"ratio {label}: {ratio:.1f}x")
    if args.json:
        args.json.write_text(json.dumps({"cells": n, "parallel": parallel, "walls": walls,
                                         "overhead_per_cell": overhead, "ratios": ratios},
                                        indent=2))


if __name__ == "__main__":
    main()
