"""Search efficiency on the toy task: TPE vs random vs the equivalent grid at the same
trial budget, side by side in one run (embedded trainer, CPU, ``kappa search``).

Each sampler searches the same space for the toy task's validation accuracy
(``val-core/arith-val/acc/mean@1`` at the end of the run, maximised), ``--trials`` trials
per search, one trial at a time (so TPE sees every earlier trial):

* ``learning_rate``  loguniform [1e-5, 1e-2] — from too small to learn anything in a short
  run to large enough to break the policy: the objective varies a lot along it;
* ``kl_coef``        categorical [0, 0.01, 0.1] — the KL penalty's strength.

``sampler: grid`` builds the equivalent grid: every ``kl_coef`` × as many learning rates
(log-spaced, ends included) as fit the budget — with a budget divisible by 3 it has
exactly ``--trials`` points. TPE and random run once per search seed (``search.seed``); the
grid is the same points whatever the seed (only their order changes, and trials run to
the end regardless), and the training seed is the same for all, so the grid runs once.
Reported: best objective found per sampler (mean ± spread over the seeds: the sample
standard deviation, and min..max), its ratio to the grid's, the mean objective of all its
trials (how good the proposals are, not only the luckiest), and wall time per trial.
TPE's first trials are random (a third of the budget, kappa's ``tpe_startup_trials``)
and, with the same seed, the very points the random sampler draws first.

    .venv/bin/python bench/search_efficiency.py          # 12 trials x 3 seeds, 40 steps
    .venv/bin/python bench/search_efficiency.py --trials 6 --max-steps 20 --seeds 3
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TOY = ROOT / "experiments" / "toy" / "table2.yaml"
VAL = "val-core/arith-val/acc/mean@1"
SPACE = {"learning_rate": {"loguniform": [1.0e-5, 1.0e-2]},
         "kl_coef": {"categorical": [0.0, 0.01, 0.1]}}


def make_spec(name: str, sampler: str, seed: int, trials: int, max_steps: int,
              parallel: int) -> str:
    """The toy task's base settings (GRPO) with a ``search:`` block."""
    toy = yaml.safe_load(TOY.read_text())
    base = dict(toy["base"])
    base.update(baseline="grpo", max_steps=max_steps, val_every=max(1, max_steps // 4))
    spec = {"name": name, "backend": "embedded", "base": base,
            "resources": toy.get("resources", {}), "retries": 0,
            "search": {"space": SPACE, "objective": {"metric": VAL, "direction": "maximize",
                                                     "at": "final"},
                       "trials": trials, "parallel": parallel, "sampler": sampler,
                       "seed": seed, "pruner": "none"}}
    return yaml.safe_dump(spec, sort_keys=False)


def prebuild_warm_start(spec_text: str) -> float:
    """Build the (shared) warm start once, so no search pays for it; seconds."""
    from orchestrator.backends.embedded.model import resolve_device
    from orchestrator.backends.embedded.settings import EmbeddedSettings
    from orchestrator.backends.embedded.warmstart import load_or_build

    settings = EmbeddedSettings.model_validate(yaml.safe_load(spec_text)["base"])
    start = time.perf_counter()
    load_or_build(settings, resolve_device(settings.device))
    return time.perf_counter() - start


def run_search(path: Path) -> dict[str, Any]:
    """Run one search to the end; its trials' values, the best, wall seconds."""
    import optuna

    from orchestrator.registry import Registry
    from orchestrator.search.hook import open_storage
    from orchestrator.sweeps.driver import submit

    start = time.perf_counter()
    result = submit(path, wait=True)
    wall = time.perf_counter() - start
    with Registry.open() as reg:
        study = optuna.load_study(study_name=result.sweep, storage=open_storage(reg.engine))
        states = sorted({c.state.value for c in reg.cells(result.sweep)})
    trials = study.get_trials(deepcopy=False)
    values = [t.value for t in trials if t.value is not None]
    return {"sweep": result.sweep, "wall_s": wall, "trials": len(trials),
            "values": values, "best": max(values) if values else None,
            "best_params": study.best_params if values else None, "states": states}


def spread(values: list[float]) -> str:
    """``mean ± sd (min..max)``."""
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.3f} ± {sd:.3f} ({min(values):.3f}..{max(values):.3f})"


def main() -> int:
    """Run the three samplers and print the comparison; exit 1 if a search failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=3, help="search seeds (TPE, random)")
    parser.add_argument("--max-steps", type=int, default=40)
    parser.add_argument("--parallel", type=int, default=1, help="trials at once per search")
    parser.add_argument("--samplers", default="tpe,random,grid")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the KAPPA_HOME it used")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    samplers = [s.strip() for s in args.samplers.split(",") if s.strip()]

    home = Path(tempfile.mkdtemp(prefix="kappa-bench-search-"))
    os.environ["KAPPA_HOME"] = str(home)
    os.environ.setdefault("KAPPA_POLL_INTERVAL", "0.2")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"toy task (GRPO), {args.max_steps} steps per trial, {args.trials} trials per "
          f"search, {args.parallel} at a time; space {json.dumps(SPACE)}; TPE/random over "
          f"{args.seeds} search seeds, grid once; KAPPA_HOME {home}", flush=True)
    warm = prebuild_warm_start(make_spec("w", "random", 0, 1, args.max_steps, 1))
    print(f"warm start built in {warm:.1f} s (not timed below)", flush=True)

    runs: dict[str, list[dict[str, Any]]] = {}
    for sampler in samplers:
        for seed in range(1 if sampler == "grid" else args.seeds):
            path = home / f"{sampler}-{seed}.yaml"
            path.write_text(make_spec(f"search-{sampler}-{seed}", sampler, seed, args.trials,
                                      args.max_steps, args.parallel))
            run = run_search(path)
            runs.setdefault(sampler, []).append(run)
            best = "—" if run["best"] is None else f"{run['best']:.3f}"
            print(f"{sampler:>6} seed {seed}: best {best} of {run['trials']} trials "
                  f"{run['best_params']}, {run['wall_s']:.1f} s", flush=True)

    grid_best = statistics.fmean(r["best"] for r in runs.get("grid", []) if r["best"] is not None) \
        if runs.get("grid") else None
    print("\n| sampler | searches | trials each | best objective: mean ± sd (min..max) "
          "| mean best / grid | mean of all trials | s per trial |")
    print("|---|---:|---:|---|---:|---:|---:|")
    summary: dict[str, Any] = {}
    for sampler, rs in runs.items():
        bests = [r["best"] for r in rs if r["best"] is not None]
        mean = statistics.fmean(bests) if bests else float("nan")
        ratio = mean / grid_best if grid_best else float("nan")
        per_trial = sum(r["wall_s"] for r in rs) / max(1, sum(r["trials"] for r in rs))
        # How good the proposals are on average, not only the luckiest one.
        every = [v for r in rs for v in r["values"]]
        average = statistics.fmean(every) if every else float("nan")
        summary[sampler] = {"bests": bests, "mean": mean, "ratio_vs_grid": ratio,
                            "mean_all_trials": average, "s_per_trial": per_trial}
        print(f"| {sampler} | {len(rs)} | {rs[0]['trials']} | "
              f"{spread(bests) if bests else '—'} | {ratio:.2f} | {average:.3f} | "
              f"{per_trial:.1f} |")
    if "tpe" in summary and "random" in summary:
        pairs = list(zip(summary["tpe"]["bests"], summary["random"]["bests"], strict=False))
        wins = sum(t > r for t, r in pairs)
        print(f"\nTPE beat random on {wins} of {len(pairs)} seeds (same seed, same budget).")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1,
                                        default=str))
    if not args.keep:
        import shutil

        shutil.rmtree(home, ignore_errors=True)
    failed = any(r["best"] is None for rs in runs.values() for r in rs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
