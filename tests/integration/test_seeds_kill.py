"""SIGKILL of the scheduler of a seeds-on-demand sweep around the moment a seed's cells end
and the next seed's are added (the real ``kappa`` CLI in processes, the local executor,
SQLite and MLflow; the fake backend's ``sweep`` curve, as in :mod:`test_seeds_on_demand`).

Each scenario kills ``kappa submit --wait`` (then each ``kappa resume --wait`` that
follows) shortly after the k-th cell's trainer has written its end, k and the delay
drawn from the scenario's seed (printed as ``seeds kill seed=N``; ``KAPPA_FAULT_SEEDS``
replays chosen ones), so the kill lands before the scheduler noticed the end, between its
recording the end and adding the next seed, or while it adds it. Then ``kappa resume``
must end the sweep with exactly the cells an uninterrupted run has, none twice, every one
succeeded, and the same decisions.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from kit.home import use_home
from kit.kappa_main import KAPPA_SCRIPT
from test_seeds_on_demand import seeds_spec

from orchestrator.analysis.seed_live import seed_state
from orchestrator.grid.plan import stored_plan
from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.sweep import Sweep

NAME = "seeds-kill"
SAFETY = 300  # seconds: a guard against hangs, not a speed assertion
KILLS = 3
# What an uninterrupted run ends with: (baseline, reward_budget, seed) of every cell.
EXPECTED = sorted([(b, rb, s) for rb in (False, True) for b, seeds in
                   (("grpo", range(2)), ("noisy", range(4))) for s in seeds])


def _seeds(default: range) -> list[int]:
    chosen = os.environ.get("KAPPA_FAULT_SEEDS")
    return [int(s) for s in chosen.split(",")] if chosen else list(default)


def _ended(home: Path) -> int:
    """Cells whose trainer ran to its end (the fake trainer's completions log)."""
    log = home / "runs" / "completions.log"
    return len(log.read_text().split()) if log.exists() else 0


def _start(folder: Path, logs: list[Path], *args: str) -> subprocess.Popen[bytes]:
    log = folder / f"kappa-{len(logs)}.log"
    logs.append(log)
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, str(KAPPA_SCRIPT), *args], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=dict(os.environ), start_new_session=True)


def _kill_after(driver: subprocess.Popen[bytes], home: Path, cells: int, delay: float
                ) -> str:
    """SIGKILL ``driver`` ``delay`` s after ``cells`` cells' trainers ended."""
    deadline = time.monotonic() + SAFETY
    while _ended(home) < cells and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(delay)
    if driver.poll() is not None:
        return f"ended before its kill after cell {cells}"
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    with Registry.open() as reg:  # what the kill left: a seed ended, its next not added?
        plan = stored_plan(NAME, reg.get_sweep(NAME).plan)
        assert plan.seeds is not None
        rows = seed_state(reg.cells(NAME), plan.seeds).rows
    gap = [r.row for r in rows if r.next_seed is not None]
    return (f"killed {delay:.2f} s after cell {cells} ended"
            + (f" (before {', '.join(gap)} got its next seed)" if gap else ""))


@pytest.mark.slow
@pytest.mark.parametrize("seed", _seeds(range(4)))
def test_a_killed_scheduler_loses_and_duplicates_no_seed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    home = use_home(tmp_path / "home", monkeypatch, cli=True)
    rng = random.Random(seed)
    spec = tmp_path / "seeds.yaml"
    spec.write_text(seeds_spec(NAME))
    logs: list[Path] = []
    # Kill points spread over the sweep's 12 cell ends, one after another.
    points = sorted(rng.sample(range(1, len(EXPECTED)), KILLS))
    done = []
    for n, cells in enumerate(points):
        args = ("submit", str(spec), "--wait") if n == 0 else ("resume", NAME, "--wait")
        done.append(_kill_after(_start(tmp_path, logs, *args), home, cells,
                                rng.uniform(0.0, 0.3)))
    what = "; ".join(done)
    print(f"seeds kill seed={seed}: {what}")
    code = _start(tmp_path, logs, "resume", NAME, "--wait").wait(SAFETY)
    output = "".join(f"--- {p.name}\n{p.read_text(errors='replace')}" for p in logs)
    assert code == 0, f"seed={seed} {what}\n{output}"
    assert "Traceback" not in output, f"seed={seed} {what}\n{output}"
    with Registry.open() as reg:
        cells = reg.cells(NAME)
        shown = Sweep(reg, NAME).status().seeds
    got = [(c.axes["baseline"], c.axes["reward_budget"], c.axes["seed"]) for c in cells]
    assert sorted(got) == EXPECTED, f"seed={seed} {what}: {Counter(got)}"
    assert {c.state for c in cells} == {CellState.SUCCEEDED}, f"seed={seed} {what}"
    assert shown is not None
    decided = {c["row"]: (c["decision"], c["seeds"]) for c in shown.as_json()["comparisons"]}
    assert decided == {"baseline=grpo": ("positive", 2),
                       "baseline=noisy": ("undecided at max", 4)}, f"seed={seed} {what}"
    assert json.loads(json.dumps(shown.as_json()))  # JSON-able after a crash, too
