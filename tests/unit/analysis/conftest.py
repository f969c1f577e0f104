"""Known numbers for table tests: the first paper's Table 2 (Qwen3-8B and Llama blocks)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import pytest
import typer
from kit.synthetic import write_run_folders

from orchestrator.analysis.frame import CellResult, frame_from_results
from orchestrator.cli import results_cmd

BENCH = ("AMC23", "AIME24", "AIME25", "MATH500", "Olympiad")

# Table 2 of the first paper: (absolute scores, +RB deltas) in points, per model/baseline.
TABLE2: dict[str, dict[str, tuple[Sequence[float], Sequence[float]]]] = {
    "Qwen3-8B": {
        "grpo": ([82.50, 26.67, 43.33, 95.60, 51.27], [10.00, 10.00, 10.00, 1.20, 2.12]),
        "drgrpo": ([82.50, 30.00, 43.33, 97.20, 47.46], [5.00, 6.67, 3.33, -0.20, 1.27]),
        "gspo": ([90.00, 26.67, 36.67, 96.80, 47.04], [5.00, 6.67, 6.67, 1.00, 1.69]),
    },
    "Llama3.2-3B": {
        "grpo": ([7.50, 3.33, 0.00, 67.60, 20.31], [12.50, 0.00, 3.33, 3.20, 1.53]),
        "drgrpo": ([30.00, 10.00, 0.00, 68.60, 14.94], [12.50, 6.67, 6.67, 2.00, 1.15]),
        "gspo": ([22.50, 3.33, 0.00, 72.20, 14.83], [7.50, 3.33, 3.33, 5.00, 1.27]),
    },
}

# Table 3: (KL, RB) -> absolute scores.
TABLE3: dict[tuple[bool, bool], Sequence[float]] = {
    (True, False): [82.50, 26.67, 43.33, 95.60, 51.27],
    (True, True): [92.50, 36.67, 53.33, 96.80, 53.39],
    (False, False): [85.00, 30.00, 40.00, 96.00, 50.35],
    (False, True): [95.00, 36.67, 46.67, 97.00, 52.89],
}


def metrics(points: Sequence[float]) -> dict[str, float]:
    """Final metrics as a backend reports them: accuracies in [0, 1]."""
    return {f"eval/{b}/mean@8": p / 100.0 for b, p in zip(BENCH, points, strict=True)}


@pytest.fixture
def table2_frame() -> pd.DataFrame:
    """One seed per cell, Table 2's numbers."""
    cells = []
    for model, rows in TABLE2.items():
        for baseline, (absolute, delta) in rows.items():
            for rb in (False, True):
                pts = [a + (d if rb else 0.0) for a, d in zip(absolute, delta, strict=True)]
                cells.append(
                    CellResult(
                        "t2",
                        f"{model}-{baseline}-{rb}",
                        "succeeded",
                        {"model": model, "baseline": baseline, "reward_budget": rb, "seed": 0},
                        metrics(pts),
                    )
                )
    return frame_from_results(cells)


@pytest.fixture
def table3_frame() -> pd.DataFrame:
    """Table 3's crossing, one seed per cell."""
    cells = [
        CellResult(
            "t3",
            f"kl{int(kl)}-rb{int(rb)}",
            "succeeded",
            {"baseline": "grpo", "use_kl_loss": kl, "reward_budget": rb, "seed": 0},
            metrics(points),
        )
        for (kl, rb), points in TABLE3.items()
    ]
    return frame_from_results(cells)


@pytest.fixture
def results_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[Sequence[CellResult], int], typer.Typer]:
    """A factory: the results commands over run folders of ``cells`` (``steps`` curve points)."""

    def make(cells: Sequence[CellResult], steps: int) -> typer.Typer:
        monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
        write_run_folders(tmp_path / "runs", list(cells), steps=steps)
        app = typer.Typer()
        app.add_typer(results_cmd.commands)
        return app

    return make

