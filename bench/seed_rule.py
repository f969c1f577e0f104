"""Seeds on demand against the fixed design, by simulation, side by side in one run.

For each design (``start``..``max`` seeds, spending function) and each true difference
``d`` (in units of the seed-to-seed standard deviation of a paired difference), draws
``--reps`` comparisons of ``max`` normal pairs and runs them through the seed rule
(:func:`orchestrator.stopping.seeds.decide`, the function the live rule and
``kappa seed-check`` use) and through the fixed design's 95% paired t-test over all
``max`` pairs. Printed per row: how often each calls the difference positive or negative
(at ``d = 0``: the error rate, which the rule bounds by alpha), the seeds the rule uses on
average and their ratio to the fixed design's. Deterministic for a given ``--seed``.

    .venv/bin/python bench/seed_rule.py            # start 3, max 8 and start 2, max 5
    .venv/bin/python bench/seed_rule.py --reps 20000
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.special import stdtrit

from orchestrator.stopping.seeds import SeedRule, decide

DIFFERENCES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)


def fixed_rate(draws: np.ndarray) -> float:
    """Share of rows a fixed 95% paired t-test over every pair calls nonzero."""
    n = draws.shape[1]
    half = stdtrit(n - 1, 0.975) * draws.std(axis=1, ddof=1) / math.sqrt(n)
    return float((np.abs(draws.mean(axis=1)) > half).mean())


def main() -> None:
    """Print the comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=20261205)
    parser.add_argument("--differences", default=",".join(f"{d:g}" for d in DIFFERENCES),
                        help="comma-separated true differences d, in seed-to-seed SDs")
    args = parser.parse_args()
    differences = [float(d) for d in args.differences.split(",") if d.strip()]
    rng = np.random.default_rng(args.seed)
    print(f"seed {args.seed}, {args.reps} comparisons per row; d in seed-to-seed SDs\n")
    print("| design | spending | d | rule: decided ± | fixed: decided ± | rule seeds | "
          "fixed seeds | seeds ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for start, top in ((3, 8), (2, 5)):
        for spending in ("obrien-fleming", "pocock"):
            rule = SeedRule(start, top, 0.05, spending=spending)
            for d in differences:
                draws = rng.normal(d, 1.0, size=(args.reps, top))
                looks = [decide(row.tolist(), rule) for row in draws]
                signed = sum(1 for x in looks if x and x.decision in ("positive", "negative"))
                seeds = sum(x.n for x in looks if x) / len(looks)
                print(f"| {start}..{top} | {spending} | {d:g} | {signed / args.reps:.3f} | "
                      f"{fixed_rate(draws):.3f} | {seeds:.2f} | {top} | {seeds / top:.2f} |")


if __name__ == "__main__":
    main()
