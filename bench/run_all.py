"""Run every benchmark in bench/ (each ``bench/*.py`` but this one) and print its results.

Each benchmark is a script that compares side by side in one run and prints its own
table and ratios; this runs them one after another (they would only disturb each other
in parallel), prints their output under a heading, and ends with a summary line per
script. Extra arguments after ``--`` go to every script; ``--only NAME`` runs one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def benchmarks(only: list[str] | None = None) -> list[Path]:
    """The benchmark scripts, by name (this runner and private helpers excluded)."""
    found = sorted(p for p in HERE.glob("*.py")
                   if p.name != Path(__file__).name and not p.name.startswith("_"))
    if only:
        wanted = {name.removesuffix(".py") for name in only}
        found = [p for p in found if p.stem in wanted]
    return found


def main() -> int:
    """Run the benchmarks; exit non-zero if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", help="run just this benchmark (repeatable)")
    parser.add_argument("rest", nargs="*", help="arguments passed to every benchmark")
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    results: list[tuple[str, int, float]] = []
    for script in benchmarks(args.only):
        print(f"\n=== {script.stem} ===", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(script), *args.rest], cwd=HERE.parent,
                               env=env)
        results.append((script.stem, code, time.perf_counter() - start))
    print("\n=== summary ===")
    for name, code, seconds in results:
        print(f"{name:<40} {'ok' if code == 0 else f'FAILED ({code})':<12} {seconds:7.1f} s")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
