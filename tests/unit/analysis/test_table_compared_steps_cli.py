"""``kappa table`` says where each delta's pairs were compared when a stopping rule ended
some early: steps and stop reasons as a real registry (SQLite) holds them."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit.cells import make_cell
from kit.cli import run_kappa

from orchestrator.registry import CellState, Registry

OPTS = ("--delta", "reward_budget=false")
STOPPED = "plateau at step {} (val-core/x/acc/mean@1)"


def _store(sweep: str, ends: dict[tuple[bool, int], int], total: int = 150) -> None:
    """A sweep of grpo × reward_budget × seeds 0-1; ``ends``: where each cell ended."""
    with Registry.open() as reg:
        reg.upsert_sweep(sweep, backend="embedded", spec_text=f"name: {sweep}\n")
        cells = {(rb, seed): make_cell(f"{sweep}-{int(rb)}-{seed}", 2 * int(rb) + seed,
                                       {"baseline": "grpo", "reward_budget": rb, "seed": seed})
                 for rb in (False, True) for seed in (0, 1)}
        reg.add_cells(sweep, list(cells.values()))
        for key, cell in cells.items():
            ref = (sweep, cell.cell_id)
            assert reg.transition(ref, CellState.PENDING, CellState.QUEUED)
            assert reg.start_attempt(ref) is not None
            step = ends.get(key, total)
            reg.update_progress(ref, step, total)
            assert reg.finish_attempt(
                ref, CellState.SUCCEEDED, exit_code=0,
                final_metrics={"eval/x/mean@8": 0.5 + 0.1 * key[0] + 0.01 * key[1]},
                stop_reason=STOPPED.format(step) if step < total else None)


def test_table_names_the_step_of_each_delta(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    _store("full", {})
    _store("together", {(rb, s): 120 for rb in (False, True) for s in (0, 1)})
    _store("apart", {(False, 0): 120, (True, 0): 120, (False, 1): 120})
    full = run_kappa(capsys, "table", "full", *OPTS)
    assert full.code == 0, full.output
    assert "§" not in full.out and "compared" not in full.out
    together = run_kappa(capsys, "table", "together", *OPTS)
    assert "| + RB §1 | 2 |" in together.out
    assert "§1 GRPO, + RB: compared at step 120, stopped early." in together.out
    apart = run_kappa(capsys, "table", "apart", *OPTS, "--format", "csv")
    assert apart.out.splitlines()[0].endswith(",compared")
    assert "steps differ (base vs + RB): 120 vs 150 (seed 1)" in apart.out
    latex = run_kappa(capsys, "table", "apart", *OPTS, "--format", "latex")
    assert r"+ RB \S{}1 &" in latex.out


def test_delta_rows_say_their_interval_and_the_bootstrap_options_are_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    _store("full", {})
    table = run_kappa(capsys, "table", "full", *OPTS)
    assert "95% paired t-interval over seeds (Student t, n − 1 degrees of freedom" in table.out
    assert "bootstrap" not in table.out
    # The options of the bootstrap meant nothing once it went: typer's unknown option.
    for option in ("--resamples", "--bootstrap-seed"):
        gone = run_kappa(capsys, "table", "full", *OPTS, option, "200")
        assert gone.code == 2 and "No such option" in gone.output, gone.output
