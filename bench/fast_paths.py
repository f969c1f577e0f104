"""The commands that only look at a sweep, side by side with ``python -c "import mlflow"``.

On a finished two-cell sweep of the embedded backend (run once, in a temporary
``KAPPA_HOME``), times the wall seconds of each command as a user runs it (a fresh
process): a resubmit with nothing new to run, ``kappa status SWEEP``, ``kappa table
SWEEP``, ``kappa logs CELL`` and ``kappa doctor`` (every check), against importing MLflow
alone. The commands are interleaved round by round, so a busy machine slows all alike;
prints the median and range of each and its ratio to the MLflow import. ``--rounds N``
(default 5), ``--json PATH`` saves the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = """name: fast-paths
backend: embedded
base:
  task: arithmetic
  group_size: 4
  prompts_per_step: 4
  ppo_mini_batches: 1
  max_steps: 2
  val_every: 1
  val_size: 16
  eval_samples: 2
  model: {d_model: 16, n_layers: 1, n_heads: 2}
  warm_start: {steps: 5, batch_size: 8}
axes:
  reward_budget: [false, true]
"""


def kappa(*args: str) -> list[str]:
    """The command line of ``kappa ARGS`` with this interpreter."""
    return [sys.executable, "-m", "orchestrator", *args]


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one run of ``argv`` (which must succeed)."""
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    """Run the sweep, then the rounds; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, help="save the numbers here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kappa-fast-paths-") as tmp:
        env = {**os.environ, "KAPPA_HOME": str(Path(tmp) / "home"),
               "PYTHONPATH": str(ROOT)}
        spec = Path(tmp) / "spec.yaml"
        spec.write_text(SPEC)
        subprocess.run(kappa("submit", str(spec), "--wait"), cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        cell = subprocess.run(kappa("status", "fast-paths", "--json"), cwd=ROOT, env=env,
                              check=True, capture_output=True, text=True).stdout
        cell_id = json.loads(cell)["cells"][0]["cell_id"]
        commands = {
            'python -c "import mlflow"': [sys.executable, "-c", "import mlflow"],
            "kappa submit SPEC (nothing new)": kappa("submit", str(spec)),
            "kappa status SWEEP": kappa("status", "fast-paths"),
            "kappa table SWEEP": kappa("table", "fast-paths", "--rows", "reward_budget"),
            "kappa logs CELL": kappa("logs", cell_id),
            "kappa doctor": kappa("doctor", "--min-free-gib", "0"),
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, argv in commands.items():
                times[name].append(timed(argv, env))
    base = statistics.median(next(iter(times.values())))
    print(f"{'command':<34} {'median s':>9} {'range s':>13} {'÷ import mlflow':>16}")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{name:<34} {median:9.2f} {min(seconds):6.2f}–{max(seconds):<6.2f} "
              f"{median / base:15.2f}×")
    if args.json:
        args.json.write_text(json.dumps(times, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
