"""Comparison groups under SIGKILL: ``kappa submit --wait`` of one group (arms ``early``
and ``late`` of the fake ``score`` curve, which meet a threshold at steps 2 and 8) is
killed at a moment drawn from the scenario's seed — the scheduler alone or with the
jobs' process groups, before the group's decision or a seeded delay after its decision
file appears (half the time within 20 ms: between the decision and the members' own
requests) — then ``kappa resume`` (in process) finishes it.

Whatever the moment, both members end ``succeeded`` and at one step: both stopped
together at the group's step (the same request in both run folders), or both ran to
full length (killed jobs are retried from their checkpoints and stop where the group
decided). Each scenario prints ``group-kill seed=N: ...``; ``KAPPA_GROUP_KILL_SEEDS=N,M``
replays those seeds.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from kit.home import use_home
from kit.kappa_main import KAPPA_SCRIPT
from kit.run_files import job_groups, progress_step

from orchestrator.registry import CellState, Registry
from orchestrator.runs.stop_request import read_stop_request
from orchestrator.sweeps.driver import resume

SAFETY = 300  # seconds: a guard against hangs, not a speed assertion
SWEEP = "group-kill"
STEPS = 40
ARMS = {"early": {"values": [0.1, 0.6]}, "late": {"values": [0.1] * 7 + [0.6]}}


def _seeds(default: Sequence[int]) -> list[int]:
    chosen = os.environ.get("KAPPA_GROUP_KILL_SEEDS")
    return [int(s) for s in chosen.split(",")] if chosen else list(default)


def _run_dirs(home: Path) -> list[Path]:
    return [d for d in (home / "runs" / SWEEP).glob("*") if (d / "config.yaml").exists()]






def _kill(home: Path, rng: random.Random, driver: subprocess.Popen[bytes]) -> str:
    before = rng.random() < 0.3
    at_progress = rng.randint(4, 12)
    delay = rng.uniform(0.0, 0.5) if rng.random() < 0.5 else rng.uniform(0.0, 0.02)
    jobs_too = rng.random() < 0.5
    deadline = time.monotonic() + SAFETY
    while True:
        if driver.poll() is not None or time.monotonic() > deadline:
            return "nothing (the sweep ended first)"
        dirs = _run_dirs(home)
        if before and dirs and max(progress_step(d) for d in dirs) >= at_progress:
            what = f"at progress {max(progress_step(d) for d in dirs)}"
            break
        decided = list((home / "runs" / SWEEP / ".groups").glob("*.json"))
        if not before and (decided or any((d / "stop-request.json").exists() for d in dirs)):
            time.sleep(delay)
            what = f"{delay:.3f} s after the group's decision appeared"
            break
        time.sleep(0.002)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    if jobs_too:
        for group in job_groups(home / "runs" / SWEEP):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
    return ("the scheduler and the jobs" if jobs_too else "the scheduler") + f" {what}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", _seeds(range(6)))
def test_a_group_killed_at_any_moment_ends_at_one_step(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = use_home(tmp_path / "home", monkeypatch, cli=True)
    monkeypatch.setenv("KAPPA_POLL_INTERVAL", "0.1")
    monkeypatch.setenv("KAPPA_RETRY_BACKOFF", "0.05")
    rng = random.Random(seed)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"name: {SWEEP}\nbackend: fake\nretries: 2\n"
        f"base: {{curve: stop, steps: {STEPS}, step_seconds: 0.1, checkpoint_every: 3}}\n"
        f"axes:\n  arm: {json.dumps(ARMS)}\n  seed: [0]\n"
        "stop: {threshold: {metric: score, at_least: 0.5}, together: [arm]}\n")
    with open(tmp_path / "submit.log", "ab") as log:
        driver = subprocess.Popen([sys.executable, str(KAPPA_SCRIPT), "submit", str(spec),
                                   "--wait", "--max-parallel", "2"], stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env=dict(os.environ), start_new_session=True)
    what = _kill(home, rng, driver)
    print(f"group-kill seed={seed}: killed {what}")
    counts = resume(SWEEP)
    assert counts[CellState.SUCCEEDED] == 2, counts
    with Registry.open() as reg:
        cells = reg.cells(SWEEP)
    steps = {c.progress_step for c in cells}
    assert len(steps) == 1, [(c.axes["arm"], c.progress_step, c.stop_reason) for c in cells]
    reasons = {c.stop_reason for c in cells}
    if reasons == {None}:
        assert steps == {STEPS}  # both ran to full length
        return
    (reason,) = reasons  # both stopped on the same decision
    assert reason is not None and "together with 1 other cell" in reason
    decisions = {(r.step, r.met_by) for r in (read_stop_request(Path(c.run_dir or ""))
                                              for c in cells) if r is not None}
    assert decisions == {(steps.pop(), 8)}
