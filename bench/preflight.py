"""verl preflight cost: per cell and for a 100-cell grid, cold vs warm cache, side by side.

* ``worker start``  starting the compose worker (imports verl, i.e. torch: paid once per
                    process, only on a cache miss).
* ``cold``          100 distinct cells composed by that worker (cache empty).
* ``warm``          the same 100 cells again, answered from the disk cache with no worker.

Prints seconds per cell and for the grid, and the cold/warm ratio; ``--cells N`` changes
the grid size, ``--json PATH`` saves the numbers.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def grid(n: int) -> dict[str, object]:
    """``n`` distinct paper-sized cells: baselines × RB × seeds."""
    from orchestrator.backends.verl.settings import VerlSettings

    baselines = ("grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov")
    combos = itertools.product(range(n), baselines, (False, True))
    cells: dict[str, object] = {}
    for seed, baseline, rb in combos:
        if len(cells) == n:
            break
        cells[f"{baseline}-{rb}-{seed}"] = VerlSettings(
            model_path="Qwen/Qwen3-8B", train_files="/d/train.parquet",
            val_files="/d/val.parquet", baseline=baseline, reward_budget=rb, seed=seed)
    return cells


def main() -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args, _ = parser.parse_known_args()
    os.environ["KAPPA_HOME"] = tempfile.mkdtemp(prefix="kappa-bench-preflight-")
    os.environ.pop("KAPPA_VERL_PREFLIGHT", None)
    import importlib.metadata

    import orchestrator.backends.verl.preflight as pf

    try:  # as the preflight itself reads it: without importing verl
        importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        print("verl is not installed: nothing to measure")
        return 0
    cells = grid(args.cells)
    start = time.perf_counter()
    pf._get_worker()
    started = time.perf_counter() - start
    start = time.perf_counter()
    pf.preflight(cells)  # type: ignore[arg-type]
    cold = time.perf_counter() - start
    pf.close_worker()
    start = time.perf_counter()
    pf.preflight(cells)  # type: ignore[arg-type]
    warm = time.perf_counter() - start
    assert pf._worker is None, "warm run should not need the worker"
    n = len(cells)
    rows = {"worker_start_s": started, "cold_grid_s": cold, "cold_per_cell_s": cold / n,
            "cold_grid_incl_start_s": started + cold, "warm_grid_s": warm,
            "warm_per_cell_s": warm / n, "cold_over_warm": (started + cold) / warm, "cells": n}
    print(f"{'':<28}{'grid (s)':>10}{'per cell (ms)':>16}")
    print(f"{'worker start (once)':<28}{started:>10.2f}{'':>16}")
    print(f"{'cold (compose, no cache)':<28}{cold:>10.2f}{cold / n * 1000:>16.1f}")
    print(f"{'warm (disk cache)':<28}{warm:>10.3f}{warm / n * 1000:>16.2f}")
    print(f"cold incl. worker start / warm = {(started + cold) / warm:,.0f}x for {n} cells")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
