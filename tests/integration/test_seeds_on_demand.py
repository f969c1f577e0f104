"""Seeds on demand (a ``seeds:`` block) through the real scheduler: real SQLite registry,
MLflow store and trainer processes (the fake backend's ``sweep`` curve, whose final eval
metric reward budgeting raises by exactly 0.05 for ``grpo``, and moves by a seed-to-seed
noise of mean about 0 for ``noisy``). The grpo comparison is decided at its first look;
the noisy one is not, so only its row gets more seeds, up to ``max``. The cells added are
those of the fixed design with the same seeds (same ids), and the decisions are those
``kappa seed-check`` replays on the finished sweep; status, table, report and export say
them."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pytest
from kit.cli import run_kappa
from kit.home import use_home

from orchestrator.grid.plan import parse_plan
from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.driver import submit
from orchestrator.sweeps.sweep import Sweep

NAME = "seeds-live"


def seeds_spec(name: str, seeds: str = "{start: 2, max: 4, compare: {reward_budget: false}}",
               steps: int = 2, extra: str = "") -> str:
    """A fake sweep of grpo and noisy ± RB with the ``seeds:`` block ``seeds``."""
    return (f"name: {name}\nbackend: fake\nretries: 1\n"
            f"base: {{steps: {steps}, step_seconds: 0.0{extra}}}\n"
            "axes:\n  baseline: [grpo, noisy]\n  reward_budget: [false, true]\n"
            f"seeds: {seeds}\nresources: {{gpus: 1, hours: 0.5}}\n")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch)


def test_seeds_are_added_only_where_a_comparison_is_undecided(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "seeds.yaml"
    spec.write_text(seeds_spec(NAME))
    submit(spec, wait=True, max_parallel=4)
    with Registry.open() as reg:
        cells = reg.cells(NAME)
        status = Sweep(reg, NAME).status()
    assert {c.state for c in cells} == {CellState.SUCCEEDED}
    # grpo: 2 seeds x 2 values; noisy: all 4 seeds.
    assert Counter(c.axes["baseline"] for c in cells) == {"grpo": 4, "noisy": 8}
    assert {c.axes["seed"] for c in cells if c.axes["baseline"] == "noisy"} == {0, 1, 2, 3}
    # Ordinary cells: the fixed design's with the same seeds, id for id.
    fixed = parse_plan(seeds_spec("seeds-live", "null").replace(
        "reward_budget: [false, true]\n", "reward_budget: [false, true]\n  seed: [0, 1, 2, 3]\n"))
    assert {c.cell_id for c in cells} <= set(fixed.grid.by_id)
    assert len({c.index for c in cells}) == len(cells)

    assert status.seeds is not None
    shown = status.seeds.as_json()
    decided = {c["row"]: (c["decision"], c["seeds"]) for c in shown["comparisons"]}
    assert decided == {"baseline=grpo": ("positive", 2),
                       "baseline=noisy": ("undecided at max", 4)}
    # grpo's row stopped 2 seeds short of the fixed design's 4: 2 x 2 of its 16 cells (at the
    # pace the finished cells set, all of one length).
    assert shown["unit"] == "GPU-hours" and status.seeds.fixed > 0
    assert status.seeds.saved == pytest.approx(status.seeds.fixed * 4 / 16)
    ran = run_kappa(capsys, "status", NAME)
    assert "seeds on demand (reward_budget vs false, 2..4 seeds" in ran.out, ran.output
    assert "baseline=grpo, true: positive at 2/4 seeds" in ran.out
    assert json.loads(run_kappa(capsys, "status", NAME, "--json").out)["seeds"] == shown

    # The replay on the finished sweep decides the same.
    out = tmp_path / "replay.json"
    ran = run_kappa(capsys, "seed-check", NAME, "--delta", "reward_budget=false", "--start",
                    "2", "--max", "4", "--json", str(out))
    assert ran.code == 0, ran.output
    replayed = {c["row"]: (c["decision"], c["n"])
                for c in json.loads(out.read_text())["comparisons"]}
    assert replayed == decided

    table = run_kappa(capsys, "table", NAME)
    assert table.code == 0, table.output
    assert "wider than the table's fixed-n interval" in table.out
    assert "baseline=noisy, true: undecided at max at 4/4 seeds" in table.out
    report = tmp_path / "report.html"
    assert run_kappa(capsys, "report", NAME, "--out", str(report)).code == 0
    assert "baseline=grpo, true: positive at 2/4 seeds" in report.read_text()
    rows = list(csv.DictReader(io.StringIO(run_kappa(capsys, "export", NAME).out)))
    by_cell = {(r["axis.baseline"], r["axis.reward_budget"]): r for r in rows}
    assert by_cell["grpo", "True"]["seeds.decision"] == "positive"
    assert by_cell["noisy", "False"]["seeds.decision"] == "base"



def test_seeds_on_demand_composes_with_comparison_group_stopping(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both arms of a seed form a comparison group that stops as one; the fake stop curve's
    eval is a function of the step a run ended at, so each pair differs by 0 whether or
    not its group stopped early: within a margin of 0.5 points at the first look, so no
    seed is added past ``start``, and the replay agrees."""
    spec = tmp_path / "stop.yaml"
    spec.write_text("name: seeds-stop\nbackend: fake\n"
                    "base: {curve: stop, steps: 12, step_seconds: 0.01, values: [0.1, 0.6]}\n"
                    "axes:\n  reward_budget: [false, true]\n"
                    "stop: {threshold: {metric: score, at_least: 0.5}, together: [reward_budget]}\n"
                    "seeds: {start: 2, max: 3, compare: {reward_budget: false}, margin: 0.5}\n")
    submit(spec, wait=True, max_parallel=4)
    with Registry.open() as reg:
        cells = reg.cells("seeds-stop")
        status = Sweep(reg, "seeds-stop").status()
    assert sorted(c.axes["seed"] for c in cells) == [0, 0, 1, 1]
    assert {c.state for c in cells} == {CellState.SUCCEEDED}
    for seed in (0, 1):  # a group ends at one step, stopped or not
        assert len({c.progress_step for c in cells if c.axes["seed"] == seed}) == 1
    assert status.seeds is not None
    (live,) = status.seeds.as_json()["comparisons"]
    assert (live["decision"], live["seeds"]) == ("within margin", 2)
    ran = run_kappa(capsys, "seed-check", "seeds-stop", "--delta", "reward_budget=false",
                    "--start", "2", "--max", "3", "--margin", "0.5")
    assert ran.code == 0 and "| 2 | [+0.00, +0.00] |" in ran.out and "within margin" in ran.out


@pytest.mark.slow
def test_a_real_embedded_sweep_with_the_block_ends_with_its_replays_decisions(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The tiny embedded trainer (what it decides is up to training): the sweep ends, every
    row holds the seeds its replay says it needed, and the decisions are the replay's."""
    from kit.tiny_spec import tiny_embedded

    spec = tmp_path / "embedded.yaml"
    spec.write_text(tiny_embedded("seeds-embedded", {"reward_budget": [False, True]},
                                  max_steps=2)
                    + "seeds: {start: 2, max: 3, compare: {reward_budget: false}, "
                      "metric: 'val-core/*/acc/mean@1'}\n")
    submit(spec, wait=True, max_parallel=2)
    with Registry.open() as reg:
        cells = reg.cells("seeds-embedded")
        status = Sweep(reg, "seeds-embedded").status()
    assert {c.state for c in cells} == {CellState.SUCCEEDED}
    assert status.seeds is not None
    (live,) = status.seeds.as_json()["comparisons"]
    out = tmp_path / "replay.json"
    ran = run_kappa(capsys, "seed-check", "seeds-embedded", "--delta", "reward_budget=false",
                    "--start", "2", "--max", "3", "--metric", "val-core/*/acc/mean@1",
                    "--json", str(out))
    assert ran.code == 0, ran.output
    figures = json.loads(out.read_text())
    (replayed,) = figures["comparisons"]
    assert (live["decision"], live["seeds"]) == (replayed["decision"], replayed["n"])
    assert len(cells) == figures["cells_used"] == 2 * replayed["n"]
