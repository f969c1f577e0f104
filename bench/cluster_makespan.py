"""Makespan on a simulated 64-GPU cluster: kappa's launch order against FIFO.

    .venv/bin/python bench/cluster_makespan.py [--seeds 5] [--quick] [--json out.json]
    .venv/bin/python bench/cluster_makespan.py --scenario siblings --order kappa \\
        [--seed-noise 0.1] [--sample-limit 1]

300 cells of 1, 2, 4 and 8 GPUs go through kappa's real scheduler (``SweepScheduler``,
a real SQLite registry, ``NullTracker``) onto a SIMULATED cluster of 8 nodes × 8 GPUs
with a virtual clock (``bench/_sim_cluster.py``: a fake executor and backend, since no
GPU cluster exists here). Each sweep's makespan is divided by the lower bound
max(total GPU-hours / GPUs, longest cell); 1.00 is optimal, the target is ≤ 1.05.

Orders (``orchestrator/scheduler/order.py``):

* ``kappa``    — longest expected first, lengths learnt from siblings (cells that differ
  only in the seed: ``orchestrator/scheduler/durations.py``), backfilling smaller cells;
* ``steps``    — longest declared steps first, backfilling (kappa's order before it
  learnt from siblings);
* ``backfill`` — registry order, backfilling;
* ``fifo``     — strict registry order: nothing starts before the cells ahead of it.

Scenarios (cells' true durations, lognormal; see ``draw_cells``):

* ``steps``    — cells train 100-800 steps and take time in proportion, ± lognormal noise
  (σ 0.3): what the scheduler knows (steps) predicts length up to that noise;
* ``blind``    — every cell trains 200 steps and durations scatter (σ 0.8), each cell's
  its own: nothing the scheduler can see predicts length;
* ``siblings`` — as ``blind``, but 100 configurations × 3 seeds in grid order, a
  configuration's GPUs and length shared by its seeds (× lognormal(0, ``--seed-noise``)
  per seed): nothing a cell declares predicts its length, its siblings' runs do.

For ``kappa`` on ``siblings`` it also prints how many finished siblings each cell had
when it started; ``--sample-limit N`` lets the estimates use only the first N finished
siblings of each configuration.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _sim_cluster import Launch, Scenario, SimBackend, draw_cells, simulate  # noqa: E402

ORDERS = ("kappa", "steps", "backfill", "fifo")
SCENARIOS: tuple[Scenario, ...] = ("steps", "blind", "siblings")
TARGET = 1.05


def finished_siblings_at_launch(launches: list[Launch]) -> list[int]:
    """For each cell, how many of its siblings (cells equal but for the settings that do
    not change the work) had finished when it started."""
    def config(launch: Launch) -> str:
        return json.dumps({k: v for k, v in launch.cell.settings.items()
                           if k not in SimBackend.work_free_settings}, sort_keys=True)

    ends: dict[str, list[float]] = {}
    for launch in launches:
        ends.setdefault(config(launch), []).append(launch.end)
    return [sum(end <= launch.start for end in ends[config(launch)]) for launch in launches]


def main() -> int:
    """Simulate every scenario × seed × order; print ratios; exit 1 if a run broke a fact."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=64)
    parser.add_argument("--node-gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS)
    parser.add_argument("--order", action="append", choices=ORDERS)
    parser.add_argument("--seed-noise", type=float, default=0.0,
                        help="siblings: σ of each seed's lognormal factor on its length")
    parser.add_argument("--sample-limit", type=int, default=None,
                        help="kappa: use only the first N finished siblings per configuration")
    parser.add_argument("--quick", action="store_true",
                        help="16 GPUs, 42 cells, 2 seeds (a smoke run)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.quick:
        args.gpus, args.cells, args.seeds = 16, 42, 2
    scenarios: list[Scenario] = args.scenario or list(SCENARIOS)
    orders = args.order or list(ORDERS)
    nodes = [args.node_gpus] * (args.gpus // args.node_gpus)
    print(f"simulated cluster: {len(nodes)} nodes × {args.node_gpus} GPUs; {args.cells} cells "
          f"of 1/2/4/8 GPUs; seeds 0..{args.seeds - 1}; seed noise {args.seed_noise}; "
          f"sample limit {args.sample_limit}")
    print(f"{'scenario':<9}{'seed':>5}{'bound h':>9}"
          + "".join(f"{o + ' h':>12}{'×bound':>8}" for o in orders) + f"{'sim s':>8}")
    rows: list[dict[str, object]] = []
    broken = 0
    for scenario in scenarios:
        for seed in range(args.seeds):
            cells = draw_cells(args.cells, seed, scenario, seed_noise=args.seed_noise)
            start = time.perf_counter()
            line = f"{scenario:<9}{seed:>5}"
            notes = ""
            for order in orders:
                result = simulate(cells, nodes, order, sample_limit=args.sample_limit)
                cluster = result.cluster
                once = sorted(cluster.submits.values()) == [1] * len(cells)
                ok = (result.counts["succeeded"] == len(cells) and once and cluster.refused == 0
                      and cluster.peak_busy <= cluster.total_gpus
                      and result.makespan >= result.bound - 1e-6 and result.clock_virtual)
                broken += not ok
                if order == orders[0]:
                    line += f"{result.bound / 3600:>9.2f}"
                line += f"{result.makespan / 3600:>12.2f}{result.ratio:>8.3f}" + ("" if ok else "!")
                row: dict[str, object] = {
                    "scenario": scenario, "seed": seed, "order": order,
                    "makespan_h": result.makespan / 3600, "bound_h": result.bound / 3600,
                    "ratio": result.ratio, "peak_busy_gpus": cluster.peak_busy,
                    "utilisation": cluster.busy_seconds / (result.makespan * cluster.total_gpus),
                    "facts_hold": ok}
                if order == "kappa" and scenario == "siblings":
                    known = finished_siblings_at_launch(result.launches)
                    row["finished_siblings_at_launch"] = known
                    share = sum(k > 0 for k in known) / len(known)
                    notes = (f"  kappa: {share:.0%} of cells started with ≥1 finished "
                             f"sibling (most {max(known)})")
                rows.append(row)
            print(line + f"{time.perf_counter() - start:>8.1f}" + notes, flush=True)
    print(f"\n{'scenario':<9}{'order':<10}{'mean ×bound':>12}{'worst':>8}{'≤' + str(TARGET):>7}")
    for scenario in scenarios:
        for order in orders:
            ratios = [float(str(r["ratio"])) for r in rows
                      if r["scenario"] == scenario and r["order"] == order]
            met = sum(r <= TARGET for r in ratios)
            print(f"{scenario:<9}{order:<10}{sum(ratios) / len(ratios):>12.3f}"
                  f"{max(ratios):>8.3f}{f'{met}/{len(ratios)}':>7}")
    if broken:
        print(f"{broken} run(s) broke a fact (marked !): a cell not run exactly once, a "
              "refused job, more GPUs busy than exist, a makespan under the bound, or a "
              "duration the registry did not record on the virtual clock")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
