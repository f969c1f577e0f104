"""GPU-hours saved by the ``plateau`` stopping rule: the toy Table 2 sweep with and without
it, side by side in one run (embedded trainer, CPU).

* ``full``     the toy Table 2 grid (``experiments/toy/table2.yaml``: baselines × ±RB ×
               seeds), every cell to ``max_steps``;
* ``plateau``  the same cells with ``stop: {plateau: {metric: val-core/arith-val/acc/mean@1,
               min_steps, patience}}``.

Reported: RL steps run, the sweep's wall time and the cells' summed wall time (cell-hours:
what GPU-hours are on a GPU cluster), the hours kappa's own accounting says the rule saved
(``kappa status``), and the final table of both — each number of the plateau run against
the full run's 95% CI: the baselines' means (Student t) and the +RB rows' paired deltas
(paired t; the figures of 2026-12-02 in docs/benchmarks.md used the bootstrap intervals
kappa had then, which at 2-3 seeds are the pairs' range). Both runs use the same
validation cadence, and warm-start caches are built before timing, so both load them.

``--together reward_budget`` gives the live rule a comparison group (docs/spec.md
#comparison-groups): a baseline and its ``+ RB`` run of one seed stop as one, at one step.
``--replay SWEEP`` runs nothing: it replays the plateau rule, on its own and with
``together: [reward_budget]``, on a finished full-length sweep of the registry in
``KAPPA_HOME`` (what ``kappa stop-check`` does), and prints both side by side.

Prediction for the replay on the 300-step toy Table 2 (grpo, drgrpo, dapo × ±RB × 3 seeds,
validation every 10 steps; plateau ``min_steps`` 120, ``patience`` 45: this script's
defaults of 40% and 15% of ``max_steps``, fixed before that sweep ran), written on
2026-12-02 before the replay was run: comparison groups save fewer RL steps than cells
stopping on their own, since a group waits for its slower member and a 300-step
calibration run had GRPO + RB not yet flat — about 10-25% of steps, short of the 30%
target; no delta changes sign and every delta stays inside the full run's 95% interval.
Cells on their own save more (30-40%) and move more deltas outside their interval.

Prediction for the replay on the pre-registered 300-step toy Table 2 (``toy-table2-300``:
all six baselines × ±RB × seeds 3–5, validation every 10 steps; the same rule, ``min_steps``
120, ``patience`` 45), written on 2026-12-02 at 11:29 UTC before that replay was run, after
its final accuracies had been read (its finding 1b) but not its curves: comparison groups
save 5–20% of RL steps (the earlier 3.5-baseline replay saved 9.7%); no +RB delta changes
sign; at least 4 of the 6 +RB deltas stay inside the full run's 95% interval, and at least
4 of the 6 baseline means. Cells on their own save more steps and keep fewer deltas inside.

Stop latency, per stopped cell, from the run folder: how long after the firing step's
metrics were logged (their outbox timestamp) the scheduler wrote the stop request
(``requested_at``) and the trainer logged its last step, and how many steps past the
firing step it stopped (``at_step - step``). ``--rule threshold``
(``at_least: 0`` from ``min_steps``: every cell fires at that step, while the sweep is
still launching) and ``--only-stopped`` (no full run, no tables) make that a short run.

    .venv/bin/python bench/stopping_savings.py          # 6 baselines × ±RB × 3 seeds: 72 cells
    KAPPA_HOME=~/k .venv/bin/python bench/stopping_savings.py --replay toy-t2-300 \
        --min-steps 120 --patience 45          # replay on a finished 300-step sweep
    .venv/bin/python bench/stopping_savings.py --baselines grpo,dapo --seeds 2 --max-steps 60
    .venv/bin/python bench/stopping_savings.py --baselines grpo --seeds 3 --max-steps 40 \
        --rule threshold --min-steps 7 --parallel 6 --only-stopped     # latency, ~2 min
"""

from __future__ import annotations

import argparse
import json
import logging
import os
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


def make_spec(name: str, baselines: list[str], seeds: int, max_steps: int,
              stop: dict[str, Any] | None) -> str:
    """The toy Table 2 spec with these baselines, seeds and steps (and ``stop``)."""
    spec = yaml.safe_load(TOY.read_text())
    spec["name"] = name
    base = spec["base"]
    base.pop("seed", None)
    base["max_steps"] = max_steps
    # Both variants validate equally often: 20 validation points per run.
    base["val_every"] = max(1, max_steps // 20)
    spec["axes"] = {"baseline": baselines, "reward_budget": [False, True],
                    "seed": list(range(seeds))}
    spec["retries"] = 0
    if stop is not None:
        spec["stop"] = stop
    return yaml.safe_dump(spec, sort_keys=False)


def prebuild_warm_starts(spec_text: str) -> float:
    """Build the warm start of every seed once (both variants then load it); seconds."""
    from orchestrator.backends.embedded.model import resolve_device
    from orchestrator.backends.embedded.settings import EmbeddedSettings
    from orchestrator.backends.embedded.warmstart import load_or_build

    spec = yaml.safe_load(spec_text)
    start = time.perf_counter()
    for seed in spec["axes"]["seed"]:
        settings = EmbeddedSettings.model_validate({**spec["base"], "seed": seed})
        load_or_build(settings, resolve_device(settings.device))
    return time.perf_counter() - start


def stop_latency(run_dirs: list[Path]) -> list[dict[str, float]]:
    """Per stopped cell: the firing step, where it stopped, steps past, and seconds from
    the firing step's log to the request and to the last step it trained."""
    from orchestrator.runs.folder import OUTBOX_FILE, STOP_REQUEST_FILE, read_summary
    from orchestrator.runs.stop_request import read_stop_request

    rows = []
    for run_dir in run_dirs:
        request = read_stop_request(run_dir)
        stopped = (read_summary(run_dir) or {}).get("stopped") or {}
        if request is None or not isinstance(stopped.get("at_step"), int):
            continue
        logged: dict[int, float] = {}  # step -> when its first record was queued (s)
        outbox = run_dir / OUTBOX_FILE
        for line in outbox.read_text().splitlines() if outbox.exists() else []:
            record = json.loads(line)
            logged.setdefault(int(record["step"]), record["ts"] / 1000)
        at = int(stopped["at_step"])
        if request.step not in logged or at not in logged:
            continue
        # An older kappa wrote the request once and kept no time in it: its mtime.
        asked = getattr(request, "requested_at", None) or (
            run_dir / STOP_REQUEST_FILE).stat().st_mtime
        rows.append({"step": request.step, "at_step": at, "steps_past": at - request.step,
                     "request_s": asked - logged[request.step],
                     "stop_s": logged[at] - logged[request.step]})
    return rows


def latency_summary(rows: list[dict[str, float]]) -> str:
    """One line: median and max of each latency over the stopped cells."""
    if not rows:
        return "stop latency: no stopped cell with a timed request"
    import statistics

    def both(key: str, unit: str) -> str:
        values = [r[key] for r in rows]
        return f"{key} median {statistics.median(values):.2f}{unit} max {max(values):.2f}{unit}"

    return (f"stop latency over {len(rows)} stopped cells: " + ", ".join(
        both(k, u) for k, u in (("steps_past", ""), ("request_s", " s"), ("stop_s", " s"))))


def run_sweep(path: Path, parallel: int) -> dict[str, Any]:
    """Submit and wait; wall seconds, steps run, per-cell hours and kappa's accounting."""
    from orchestrator.grid.plan import stored_plan
    from orchestrator.registry import Registry
    from orchestrator.stopping.budget import sweep_hours
    from orchestrator.sweeps.driver import submit

    start = time.perf_counter()
    result = submit(path, wait=True, max_parallel=parallel)
    wall = time.perf_counter() - start
    with Registry.open() as reg:
        cells = reg.cells(result.sweep)
        record = reg.get_sweep(result.sweep)
    plan = stored_plan(record.name, record.plan)
    rules, resources = plan.stop, plan.resources
    hours = sweep_hours(cells, resources, rules.gpu_hours if rules else None)
    cell_hours = sum((c.finished_at - c.started_at).total_seconds() / 3600
                     for c in cells if c.started_at and c.finished_at)
    return {
        "sweep": result.sweep, "cells": len(cells), "wall_s": wall,
        "states": sorted({c.state.value for c in cells}),
        "steps": sum(c.progress_step or 0 for c in cells),
        "planned_steps": sum(c.total_steps or 0 for c in cells),
        "cell_hours": cell_hours, "stopped": sum(1 for c in cells if c.stop_reason),
        "saved_hours": hours.saved,
        "stop_steps": sorted(c.progress_step or 0 for c in cells if c.stop_reason),
        "latency": stop_latency([Path(c.run_dir) for c in cells if c.stop_reason and c.run_dir]),
    }


Numbers = dict[tuple[str, ...], tuple[float, float | None, float | None]]


def table_numbers(sweep: str) -> tuple[str, Numbers]:
    """The sweep's default main table (markdown) and its numbers with their 95% CI:
    ``{(row, kind, column): (estimate, low, high)}`` for the absolute rows of the
    baseline × RB table and the delta rows of the main table."""
    from orchestrator.analysis.report import default_tables
    from orchestrator.analysis.sources import results
    from orchestrator.analysis.tables import TableSpec, build_table, render

    frame = results(sweep)
    (_, main), *_ = default_tables(frame)
    text = render(build_table(frame, main), "markdown")
    cross = build_table(frame, TableSpec(rows=("baseline", "reward_budget"),
                                         metrics=main.metrics))
    numbers: Numbers = {}
    for table, kind in ((cross, "absolute"), (build_table(frame, main), "delta")):
        for block in table.blocks:
            labels: tuple[str, ...] = ()
            for row in block.rows:
                if row.kind == "absolute":  # delta rows sit under their base row
                    labels = tuple(str(x) or labels[i] for i, x in enumerate(row.labels))
                else:
                    labels = (*labels[:1], *(str(x) for x in row.labels if str(x)))
                if row.kind != kind:
                    continue
                for column, cell in zip(table.columns, row.cells, strict=True):
                    iv = cell.interval
                    if iv is not None:
                        numbers[(" ".join(labels), kind, column)] = (iv.estimate, iv.low,
                                                                     iv.high)
    return text, numbers


def compare(full: Numbers, plateau: Numbers) -> tuple[dict[str, int], dict[str, int]]:
    """Print each number of both runs with the full run's CI; how many lie within it."""
    within = {"absolute": 0, "delta": 0}
    compared = {"absolute": 0, "delta": 0}
    print("| row | kind | column | full | full 95% CI | plateau | within |")
    print("|---|---|---|---:|---|---:|---|")
    for key, (f_est, low, high) in full.items():
        if key not in plateau:
            continue
        p_est = plateau[key][0]
        ok = low is not None and high is not None and low - 1e-9 <= p_est <= high + 1e-9
        compared[key[1]] += 1
        within[key[1]] += ok
        ci = f"[{low:.2f}, {high:.2f}]" if low is not None and high is not None else "—"
        print(f"| {' | '.join(key)} | {f_est:.2f} | {ci} | {p_est:.2f} | "
              f"{'yes' if ok else 'NO'} |")
    for kind in ("absolute", "delta"):
        print(f"{kind}: {within[kind]} of {compared[kind]} numbers of the plateau run lie "
              "within the full run's 95% CI")
    return within, compared


def replay_both(sweep: str, min_steps: int, patience: int,
                json_path: Path | None) -> int:
    """Replay the plateau rule alone and as comparison groups on a finished sweep."""
    from orchestrator.analysis.stop_check import check_sweep, load, render
    from orchestrator.spec.stop_block import StopRules

    plan, cells = load(sweep)
    plateau = {"metric": VAL, "min_steps": min_steps, "patience": patience}
    figures = {}
    for name, together in (("alone", ()), ("together", ("reward_budget",))):
        rules = StopRules.model_validate({"plateau": plateau, "together": list(together)})
        result = check_sweep(plan, cells, rules, VAL, "reward_budget", "false")
        figures[name] = result
        print(f"\n## plateau, {name}\n")
        print(render(result, json.dumps({"plateau": plateau, "together": list(together)})))
    print("| rule | RL steps saved | cell-hours saved | means in full CI | deltas in full CI "
          "| deltas that change sign |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in figures.items():
        means, deltas = r.count("mean"), r.count("delta")
        print(f"| plateau, {name} | {1 - r.steps_stopped / r.steps_full:.1%} | "
              f"{1 - r.hours_stopped / r.hours_full:.1%} | {means[0]} of {means[1]} | "
              f"{deltas[0]} of {deltas[1]} | {deltas[2]} |")
    if json_path is not None:
        json_path.write_text(json.dumps({k: v.as_json() for k, v in figures.items()}, indent=1))
    return 0


def main() -> int:
    """Run both variants and print the comparison; exit 1 if a run failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baselines", default="grpo,drgrpo,gspo,dapo,clip_cov,kl_cov")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--min-steps", type=int, default=None,
                        help="plateau min_steps (default: 40%% of max-steps)")
    parser.add_argument("--patience", type=int, default=None,
                        help="plateau patience in steps (default: 15%% of max-steps)")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--rule", choices=("plateau", "threshold"), default="plateau",
                        help="threshold: at_least 0 from min_steps (fires at min_steps)")
    parser.add_argument("--only-stopped", action="store_true",
                        help="run only the variant with the rule (latency; no tables)")
    parser.add_argument("--together", default="",
                        help="comparison-group axes of the live rule (e.g. reward_budget)")
    parser.add_argument("--replay", metavar="SWEEP",
                        help="replay on this finished sweep (KAPPA_HOME) instead of running")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the KAPPA_HOME it used")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    baselines = [b.strip() for b in args.baselines.split(",") if b.strip()]
    min_steps = args.min_steps if args.min_steps is not None else int(0.4 * args.max_steps)
    patience = args.patience if args.patience is not None else max(1, int(0.15 * args.max_steps))
    stop: dict[str, Any] = {"plateau": {"metric": VAL, "min_steps": min_steps,
                                        "patience": patience}}
    if args.rule == "threshold":
        stop = {"threshold": {"metric": VAL, "at_least": 0.0, "min_steps": min_steps}}
    if args.together:
        stop["together"] = [a.strip() for a in args.together.split(",") if a.strip()]
    if args.replay:
        return replay_both(args.replay, min_steps, patience, args.json)

    home = Path(tempfile.mkdtemp(prefix="kappa-bench-stop-"))
    os.environ["KAPPA_HOME"] = str(home)
    os.environ.setdefault("KAPPA_POLL_INTERVAL", "0.2")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    specs = {}
    for variant, rule in (("full", None), ("plateau", stop)):
        specs[variant] = home / f"{variant}.yaml"
        specs[variant].write_text(make_spec(f"bench-{variant}", baselines, args.seeds,
                                            args.max_steps, rule))
    n_cells = len(baselines) * 2 * args.seeds
    print(f"toy Table 2: {len(baselines)} baselines x ±RB x {args.seeds} seeds = {n_cells} "
          f"cells per variant, {args.max_steps} steps, {args.parallel} at a time; plateau "
          f"min_steps {min_steps}, patience {patience}; KAPPA_HOME {home}", flush=True)
    warm = prebuild_warm_starts(specs["full"].read_text())
    print(f"warm starts built in {warm:.1f} s (not timed below)", flush=True)
    if args.only_stopped:
        stopped = run_sweep(specs["plateau"], args.parallel)
        print(f"{args.rule}: {stopped['wall_s']:.1f} s wall, {stopped['steps']} steps, "
              f"states {stopped['states']}, stop steps {stopped['stop_steps']}")
        for row in stopped["latency"]:
            print("  " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                   for k, v in row.items()))
        print(latency_summary(stopped["latency"]))
        if args.json:
            args.json.write_text(json.dumps(stopped, indent=1, default=str))
        if not args.keep:
            import shutil

            shutil.rmtree(home, ignore_errors=True)
        return 0 if stopped["states"] == ["succeeded"] else 1
    runs = {}
    for variant in ("full", "plateau"):
        runs[variant] = run_sweep(specs[variant], args.parallel)
        r = runs[variant]
        print(f"{variant:>8}: {r['wall_s']:7.1f} s wall, {r['steps']} steps, "
              f"{r['cell_hours'] * 3600:7.1f} cell-seconds, states {r['states']}", flush=True)
    full, plat = runs["full"], runs["plateau"]

    print("\n| variant | RL steps run | sweep wall (s) | cell-seconds | cells stopped |")
    print("|---|---:|---:|---:|---:|")
    for name, r in runs.items():
        print(f"| {name} | {r['steps']} / {r['planned_steps']} | {r['wall_s']:.1f} | "
              f"{r['cell_hours'] * 3600:.1f} | {r['stopped']} / {r['cells']} |")
    ratio = {"steps": plat["steps"] / max(1, full["steps"]),
             "wall": plat["wall_s"] / full["wall_s"],
             "cell_hours": plat["cell_hours"] / full["cell_hours"]}
    print(f"\nplateau / full: steps {ratio['steps']:.2f}, sweep wall {ratio['wall']:.2f}, "
          f"cell-hours {ratio['cell_hours']:.2f}  (saved: {1 - ratio['steps']:.0%} of steps, "
          f"{1 - ratio['cell_hours']:.0%} of cell-hours)")
    print(f"kappa status accounting: saved {plat['saved_hours']:.4f} cell-hours "
          f"(planned hours of stopped cells x unrun fraction); stop steps {plat['stop_steps']}")
    print(latency_summary(plat["latency"]))

    full_text, full_numbers = table_numbers(full["sweep"])
    plat_text, plat_numbers = table_numbers(plat["sweep"])
    print("\nfull:\n" + full_text + "\nplateau:\n" + plat_text)
    within, compared = compare(full_numbers, plat_numbers)
    if args.json:
        args.json.write_text(json.dumps({
            "runs": runs, "ratios": ratio, "within_ci": within, "compared": compared,
            "full": {" | ".join(k): v for k, v in full_numbers.items()},
            "plateau": {" | ".join(k): v for k, v in plat_numbers.items()}},
            indent=1, default=str))
    if not args.keep:
        import shutil

        shutil.rmtree(home, ignore_errors=True)
    failed = any(r["states"] != ["succeeded"] for r in runs.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
