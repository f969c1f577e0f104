"""A delta whose runs were computed by different numerics is marked ‡ in `kappa table`,
naming the difference, and `--strict` refuses it (exit 2); equal numerics get no mark.
The runs are attempts recorded in a real registry with the provenance their processes
would have written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kit.cells import make_cell
from kit.cli import run_kappa

from orchestrator.registry import CellState, Registry

NAME = "numerics"


def _made(torch: str, capability: str = "AVX512") -> dict[str, Any]:
    return {"kappa": {"version": "0.1.0", "commit": "abc", "dirty": False},
            "numerics": {"backend": "embedded", "version": "1", "torch": torch},
            "machine": {"cpu_capability": capability, "threads": 2, "gpu": None,
                        "gpu_count": 0, "python": "3.11.7", "host": "h", "executor": "local"}}


def _record(home: Path, odd: dict[str, Any] | None) -> None:
    """grpo ± reward budget on seeds 0-2; the (+RB, seed 2) attempt made by ``odd``."""
    cells = [make_cell(f"c{rb:d}{seed}", 3 * rb + seed,
                       {"baseline": "grpo", "reward_budget": bool(rb), "seed": seed})
             for rb in (0, 1) for seed in range(3)]
    with Registry.open() as reg:
        reg.upsert_sweep(NAME, backend="embedded", spec_text=f"name: {NAME}\n")
        reg.add_cells(NAME, cells)
        for cell in cells:
            rb, seed = cell.axes["reward_budget"], cell.axes["seed"]
            ref = (NAME, cell.cell_id)
            assert reg.transition(ref, CellState.PENDING, CellState.QUEUED)
            assert reg.start_attempt(ref) is not None
            made = odd if (rb and seed == 2 and odd is not None) else _made("2.13.0")
            score = 0.5 + 0.01 * seed + (0.02 if rb else 0.0)
            assert reg.finish_attempt(ref, CellState.SUCCEEDED, exit_code=0, provenance=made,
                                      final_metrics={"eval/arith-val/mean@8": score})


@pytest.mark.parametrize(("odd", "differs"), [
    (_made("2.12.0"), "torch 2.13.0 vs 2.12.0"),
    (_made("2.13.0", "AVX2"), "CPU kernels AVX512 vs AVX2"),
    (None, None),
])
def test_a_delta_across_numerics_is_marked_and_strict_refuses_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        odd: dict[str, Any] | None, differs: str | None) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    _record(tmp_path, odd)
    shown = run_kappa(capsys, "table", NAME, "--delta", "reward_budget=false")
    assert shown.code == 0, shown.output
    strict = run_kappa(capsys, "table", NAME, "--delta", "reward_budget=false", "--strict")
    if differs is None:
        assert "‡" not in shown.out and "numerics differ" not in shown.out
        assert strict.code == 0
        return
    # The delta row (its pairs) is marked; the base row, all on one torch, is not.
    marked = [line for line in shown.out.splitlines() if "‡" in line and line.startswith("|")]
    assert len(marked) == 1 and "+ RB" in marked[0], shown.out
    assert f"numerics differ: {differs}" in shown.out
    assert strict.code == 2 and differs in strict.output and "--strict" in strict.output
