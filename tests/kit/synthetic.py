"""Synthetic sweeps for the analysis tests: made-up numbers shaped like real ones
(accuracies that rise and plateau, a reward-budget arm that helps a little, seeds that
differ by noise), deterministic given ``seed``, as cell results or as run folders."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from orchestrator.analysis.frame import CellResult
from orchestrator.runs.folder import (
    CELL_FILE,
    METRICS_FILE,
    write_json,
    write_progress,
    write_summary,
)
from orchestrator.runs.metrics import rewrite_metrics

BASELINES: tuple[str, ...] = ("grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov")
BENCHMARKS: tuple[str, ...] = ("amc23", "aime24", "aime25", "math500", "olympiad")


def synthetic_cells(sweep: str = "toy", *, baselines: Sequence[str] = BASELINES,
                    models: Sequence[str] = ("tiny",), seeds: Sequence[int] = (0, 1, 2),
                    benchmarks: Sequence[str] = BENCHMARKS, k: int = 8,
                    failed: Sequence[str] = (), seed: int = 0) -> list[CellResult]:
    """One cell per (model, baseline, reward_budget, seed); ids in ``failed`` did not succeed.

    Cell ids are ``<model>-<baseline>-rb<0|1>-s<seed>``.
    """
    rng = np.random.default_rng(seed)
    cells = []
    base_level = {b: 0.35 + 0.04 * i for i, b in enumerate(benchmarks)}
    for model, baseline, rb, s in itertools.product(models, baselines, (False, True), seeds):
        cell_id = f"{model}-{baseline}-rb{int(rb)}-s{s}"
        noisy = {b: base_level[b] + (0.05 if rb else 0.0) + rng.normal(0.0, 0.02)
                 for b in benchmarks}
        metrics = {f"eval/{b}/mean@{k}": float(min(1.0, max(0.0, v))) for b, v in noisy.items()}
        ok = cell_id not in failed
        cells.append(CellResult(
            sweep=sweep, cell_id=cell_id, state="succeeded" if ok else "failed",
            axes={"model": model, "baseline": baseline, "reward_budget": rb, "seed": s},
            final_metrics=metrics if ok else {}))
    return cells


def synthetic_curve(steps: int, plateau: float, rate: float, rng: np.random.Generator,
                    noise: float = 0.01) -> list[dict[str, float]]:
    """Per-step diagnostics: accuracy saturating at ``plateau``, entropy decaying, κ_eff noisy."""
    # The values are drawn from ``rng`` in key order, step by step.
    return [{
        "val-core/arith/acc/mean@1": float(
            0.2 + (plateau - 0.2) * (1.0 - math.exp(-rate * t)) + rng.normal(0.0, noise)),
        "actor/entropy": float(1.5 * math.exp(-rate * t) + 0.2 + rng.normal(0.0, 0.02)),
        "actor/pg_clipfrac": float(abs(0.05 + rng.normal(0.0, 0.01))),
        "actor/kappa_eff": float(0.5 + 0.3 * math.sin(t / 7.0) + rng.normal(0.0, 0.05)),
    } for t in range(steps)]


def write_run_folders(root: Path, cells: Sequence[CellResult], steps: int = 60,
                      seed: int = 0) -> list[CellResult]:
    """Write run folders (``cell.json``, ``metrics.jsonl``, ``summary.json``) under ``root``;
    the cells with ``run_dir`` filled in. Failed cells get a partial curve and no summary."""
    rng = np.random.default_rng(seed)
    out = []
    for i, cell in enumerate(cells):
        run_dir = root / cell.sweep / cell.cell_id
        run_dir.mkdir(parents=True, exist_ok=True)
        ok = cell.state == "succeeded"
        n = steps if ok else steps // 3
        plateau = 0.6 + 0.05 * bool(cell.axes.get("reward_budget")) + 0.01 * (i % 3)
        curve = synthetic_curve(n, plateau, rate=0.05 + 0.01 * (i % 4), rng=rng)
        rewrite_metrics(run_dir / METRICS_FILE, dict(enumerate(curve, start=1)))
        write_progress(run_dir, n, steps)
        write_json(run_dir / CELL_FILE, {"axes": dict(cell.axes), "state": cell.state,
                                         "mlflow_run_id": cell.mlflow_run_id})
        if ok:
            write_summary(run_dir, {"status": "succeeded", "steps": n,
                                    "final": dict(cell.final_metrics)})
        out.append(dataclasses.replace(cell, run_dir=str(run_dir)))
    return out
