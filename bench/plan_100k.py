"""Planning a 100k-cell spec: kappa's expand vs naive per-cell validation, side by side.

    .venv/bin/python bench/plan_100k.py [--cells 100000]

Three ways to get the same ids for the same spec (6 baselines × ±RB × 4 κ variants ×
4 clip ratios × N seeds on the embedded backend):

* ``expand (declared coupling)`` — kappa's path when the backend declares which
  settings its cross-field rules read: each free axis value and each distinct
  combination of coupled values is validated once; ids are assembled from
  pre-serialized fragments.
* ``expand (no declaration)`` — the same code when the backend declares nothing: every
  cell is validated (the conservative fallback).
* ``naive`` — per cell: backend.validate + model_dump + json.dumps + sha256.

Prints wall and CPU seconds (compare CPU seconds on a shared machine), µs per cell and
the ratio to the naive loop, and checks that all three agree on every id.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from typing import Any

from orchestrator import backends
from orchestrator.grid import expand
from orchestrator.spec import parse_spec

# What EmbeddedSettings' cross-field validators read; used only if the backend does not
# declare ``coupled_settings`` itself.
EMBEDDED_COUPLED = frozenset(
    {
        "model",
        "clip_ratio",
        "clip_ratio_low",
        "clip_ratio_high",
        "prompts_per_step",
        "ppo_mini_batches",
        "reward_correct",
        "reward_incorrect",
        "task",
        "benchmarks",
        "max_response_length",
    }
)

SPEC = """\
name: plan-100k
backend: embedded
base: {{task: arithmetic, group_size: 8, prompts_per_step: 32, max_steps: 200}}
axes:
  baseline: [grpo, drgrpo, gspo, dapo, clip_cov, kl_cov]
  reward_budget: [false, true]
  kappa:
    k5000: {{reward_correct: 5, reward_incorrect: 0, kl_coef: 0.001}}
    k1000: {{reward_correct: 1, reward_incorrect: 0, kl_coef: 0.001}}
    k200:  {{reward_correct: 1, reward_incorrect: 0, kl_coef: 0.005}}
    k40:   {{reward_correct: 1, reward_incorrect: -1, kl_coef: 0.05}}
  clip_ratio: [0.1, 0.2, 0.28, 0.4]
  seed: {seeds}
"""


def _with_coupling(declared: frozenset[str] | None) -> None:
    import sys
    import types

    base = type(backends.get_backend("embedded"))
    cls = type("BenchEmbedded", (base,), {"coupled_settings": declared})
    module = types.ModuleType("kappa_bench_backends")
    module.Backend = cls  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    backends.BACKENDS["embedded"] = f"{module.__name__}:Backend"


def _reference_loop() -> float:
    """Seconds for a 1M-iteration Python loop: how fast (or loaded) this machine is.

    About 0.03-0.05 s on an idle modern core; scale the table by it to compare machines.
    """
    start = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i
    return time.perf_counter() - start


def _timed(fn: Any) -> tuple[tuple[float, float], Any]:
    """(wall seconds, CPU seconds of this process) and the result.

    CPU time is what to compare on a shared machine: other processes inflate wall time.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return (time.perf_counter() - wall, time.process_time() - cpu), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=100_000)
    args = parser.parse_args()
    per_seed = 6 * 2 * 4 * 4
    seeds = list(range(max(1, round(args.cells / per_seed))))
    text = SPEC.format(seeds=json.dumps(seeds))
    # Past kappa's default limit on purpose (100,032 cells): this is the override a user sets.
    os.environ.setdefault("KAPPA_MAX_CELLS", str(len(seeds) * per_seed))
    original = backends.BACKENDS["embedded"]
    declared = getattr(backends.get_backend("embedded"), "coupled_settings", None)

    _with_coupling(declared or EMBEDDED_COUPLED)
    spec = parse_spec(text, "plan_100k.yaml")
    fast_s, fast = _timed(lambda: expand(spec))
    _with_coupling(None)
    slow_s, slow = _timed(lambda: expand(parse_spec(text, "plan_100k.yaml")))
    backends.BACKENDS["embedded"] = original
    backend = backends.get_backend("embedded")

    def naive() -> list[str]:
        ids = []
        for cell in fast.cells:
            dump = backend.validate(cell.settings).model_dump(mode="json")
            blob = json.dumps(
                {"backend": "embedded", "settings": dump, "labels": cell.labels},
                sort_keys=True,
                separators=(",", ":"),
            )
            ids.append(hashlib.sha256(blob.encode()).hexdigest()[:12])
        return ids

    naive_s, naive_ids = _timed(naive)
    fast_ids = [c.cell_id for c in fast.cells]
    assert fast_ids == [c.cell_id for c in slow.cells] == naive_ids, "ids disagree"
    n = len(fast.cells)
    source = "backend's own" if declared else "bench's list (backend declares none)"
    print(f"{n:,} cells; coupled settings from the {source}")
    print(f"reference: a 1M-iteration Python loop takes {_reference_loop():.3f} s here")
    print(f"{'method':<30}{'wall s':>8}{'CPU s':>8}{'µs/cell':>9}{'vs naive':>10}")
    for name, (wall, cpu) in (
        ("expand (declared coupling)", fast_s),
        ("expand (no declaration)", slow_s),
        ("naive per-cell", naive_s),
    ):
        ratio = naive_s[1] / cpu
        print(f"{name:<30}{wall:>8.3f}{cpu:>8.3f}{cpu / n * 1e6:>9.1f}{ratio:>9.1f}x")


if __name__ == "__main__":
    main()
