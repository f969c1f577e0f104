"""The commands that only look at a sweep, side by side with ``python -c "import mlflow"``.

On a finished two-cell sweep of the embedded backend (run once, in a temporary
``KAPPA_HOME``), times each command as a user runs it (a fresh process): a resubmit with
nothing new to run, ``kappa status SWEEP``, ``kappa table SWEEP``, ``kappa logs CELL``,
``kappa doctor`` (every check; verl installed, not imported) and ``kappa doctor --deep``
(its plug-in probe imports verl), against importing MLflow alone. Each is timed in wall
seconds and in CPU seconds (its process and the ones it waited for: on a busy machine the
steadier measure). The commands are interleaved round by round, so a busy machine slows all
alike; the background scheduler a resubmit starts is waited for before the next command
(its work is off the submit's path, and must not slow the others). Prints the median and
range of each, its ratios to the MLflow import, and doctor's with and without ``--deep``.
``--rounds N`` (default 5), ``--json PATH`` saves the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv`` (which must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def wait_for_schedulers(home: Path) -> None:
    """Wait until no background scheduler of this ``KAPPA_HOME`` runs (a resubmit starts
    one, detached, which finds nothing to do and ends)."""
    marker = f"KAPPA_HOME={home}\0".encode()
    while True:
        running = False
        for proc in Path("/proc").iterdir():
            try:
                if (proc.name.isdigit() and b"resume\0" in (proc / "cmdline").read_bytes()
                        and marker in (proc / "environ").read_bytes()):
                    running = True
                    break
            except OSError:  # gone meanwhile, or not ours to read
                continue
        if not running:
            return
        time.sleep(0.2)


def row(values: list[float], base: float) -> str:
    """The median, range and ratio to ``base`` of ``values``."""
    median = statistics.median(values)
    return (f"{median:7.2f} {min(values):6.2f}–{max(values):<6.2f} {median / base:6.2f}×")


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
            "kappa doctor --deep": kappa("doctor", "--min-free-gib", "0", "--deep"),
        }
        wall: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        wait_for_schedulers(Path(env["KAPPA_HOME"]))
        for _ in range(args.rounds):
            for name, argv in commands.items():
                seconds, used = timed(argv, env)
                wall[name].append(seconds)
                cpu[name].append(used)
                wait_for_schedulers(Path(env["KAPPA_HOME"]))
    base_wall = statistics.median(next(iter(wall.values())))
    base_cpu = statistics.median(next(iter(cpu.values())))
    print(f"{'command':<34} {'wall s: median, range, ÷ mlflow':<31}   "
          "CPU s: median, range, ÷ mlflow")
    for name in commands:
        print(f"{name:<34} {row(wall[name], base_wall)}   "
              f"{row(cpu[name], base_cpu)}")
    deep, plain = "kappa doctor --deep", "kappa doctor"
    print(f"doctor --deep ÷ doctor: "
          f"{statistics.median(wall[deep]) / statistics.median(wall[plain]):.2f}× wall, "
          f"{statistics.median(cpu[deep]) / statistics.median(cpu[plain]):.2f}× CPU")
    if args.json:
        args.json.write_text(json.dumps({"wall_s": wall, "cpu_s": cpu}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
