"""`kappa seed-check` replays seeds on demand on a finished sweep recorded in a real
registry: a large difference is decided early, a null one stays undecided to max, the
hours and cells used are counted against the fixed design, and bad input exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from kit.cells import make_cell
from kit.cli import run_kappa

from orchestrator.registry import CellState, Registry

NAME = "seeds"
SEED = 7  # of the simulated seed-to-seed noise


def _record(finish: bool = True) -> None:
    """grpo (RB adds +5 points) and drgrpo (RB adds nothing), ± RB, seeds 0-7."""
    rng = np.random.default_rng(SEED)
    cells = [make_cell(f"{b[0]}{rb:d}{seed}", 16 * (b == "drgrpo") + 8 * rb + seed,
                       {"baseline": b, "reward_budget": bool(rb), "seed": seed})
             for b in ("grpo", "drgrpo") for rb in (0, 1) for seed in range(8)]
    with Registry.open() as reg:
        reg.upsert_sweep(NAME, backend="embedded", spec_text=f"name: {NAME}\n")
        reg.add_cells(NAME, cells)
        for cell in cells:
            ref = (NAME, cell.cell_id)
            assert reg.transition(ref, CellState.PENDING, CellState.QUEUED)
            assert reg.start_attempt(ref) is not None
            if not finish and cell.axes["seed"] == 7:
                continue
            gain = 0.05 if cell.axes["baseline"] == "grpo" and cell.axes["reward_budget"] else 0
            score = 0.6 + gain + float(rng.normal(0, 0.005))
            assert reg.finish_attempt(ref, CellState.SUCCEEDED, exit_code=0,
                                      final_metrics={"eval/a/mean@8": score,
                                                     "eval/b/mean@8": score})


def test_a_large_difference_is_decided_early_and_a_null_one_runs_to_max(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    _record()
    out = tmp_path / "figures.json"
    ran = run_kappa(capsys, "seed-check", NAME, "--delta", "reward_budget=false",
                    "--start", "3", "--max", "8", "--json", str(out))
    assert ran.code == 0, ran.output
    assert "Metric: eval/*/mean@8 (points)" in ran.out
    figures = json.loads(out.read_text())
    by_row = {c["row"]: c for c in figures["comparisons"]}
    grpo, drgrpo = by_row["baseline=grpo"], by_row["baseline=drgrpo"]
    assert grpo["decision"] == "positive" and grpo["n"] < 8, f"seed {SEED}: {grpo}"
    assert grpo["fixed_decision"] == "positive"
    assert drgrpo["decision"] == "undecided at max" and drgrpo["n"] == 8
    assert not any(c["contradicts"] for c in figures["comparisons"])
    # grpo's row stops adding seeds; drgrpo's runs all eight.
    assert figures["cells_fixed"] == 32 and figures["cells_used"] == 16 + 2 * grpo["n"]


@pytest.mark.parametrize(("args", "place"), [
    (["--delta", "reward_budget=false", "--start", "9", "--max", "8"], "--start/--max"),
    (["--delta", "rb=false"], "--delta"),
    (["--delta", "reward_budget=maybe"], "--delta"),
    (["--delta", "reward_budget"], "--delta"),
    (["--delta", "reward_budget=false", "--spending", "linear"], "--spending"),
    (["--delta", "reward_budget=false", "--start", "9", "--max", "12"], "--max"),
])
def test_bad_input_is_refused_with_its_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        args: list[str], place: str) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    _record()
    ran = run_kappa(capsys, "seed-check", NAME, *args)
    assert ran.code == 2 and place in ran.output, ran.output


def test_an_unfinished_sweep_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    _record(finish=False)
    ran = run_kappa(capsys, "seed-check", NAME, "--delta", "reward_budget=false")
    assert ran.code == 2 and "has not finished" in ran.output


def test_a_comparison_with_fewer_seeds_is_replayed_if_they_decide_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """As in a sweep that ran seeds on demand: grpo decides within its 8 seeds of 12, so it
    is replayed; drgrpo does not, so it is left out, and said so."""
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    _record()
    out = tmp_path / "figures.json"
    ran = run_kappa(capsys, "seed-check", NAME, "--delta", "reward_budget=false", "--max", "12",
                    "--json", str(out))
    assert ran.code == 0, ran.output
    assert "1 comparison(s) left out: fewer than 12 paired seeds" in ran.out
    figures = json.loads(out.read_text())
    (grpo,) = figures["comparisons"]
    assert grpo["row"] == "baseline=grpo" and grpo["decision"] == "positive"
    assert figures["left_out"] == 1 and figures["cells_fixed"] == 2 * 12
