"""Golden markdown and LaTeX tables (tests/golden/tables/).

Regenerate after an intended change with ``KAPPA_UPDATE_GOLDEN=1 pytest tests/unit/analysis``
and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from kit.synthetic import synthetic_cells

from orchestrator.analysis.frame import frame_from_results
from orchestrator.analysis.tables import DeltaSpec, TableSpec, build_table, render

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "tables"
MAIN = TableSpec(
    rows=("baseline",), delta=DeltaSpec(axis="reward_budget", base="false"), blocks="model"
)


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KAPPA_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}; run with KAPPA_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("fmt, ext", [("markdown", "md"), ("latex", "tex")])
def test_table2_golden(table2_frame: pd.DataFrame, fmt: str, ext: str) -> None:
    _check(f"table2.{ext}", render(build_table(table2_frame, MAIN), fmt))


@pytest.mark.parametrize("fmt, ext", [("markdown", "md"), ("latex", "tex")])
def test_table3_crossing_golden(table3_frame: pd.DataFrame, fmt: str, ext: str) -> None:
    spec = TableSpec(cross=("use_kl_loss", "reward_budget"))
    _check(f"table3_crossing.{ext}", render(build_table(table3_frame, spec), fmt))


@pytest.mark.parametrize("fmt, ext", [("markdown", "md"), ("latex", "tex")])
def test_seeded_table_with_a_failed_cell_golden(fmt: str, ext: str) -> None:
    cells = synthetic_cells(
        "toy",
        baselines=("grpo", "dapo"),
        benchmarks=("arith", "logic"),
        failed=("tiny-dapo-rb1-s2",),
    )
    frame = frame_from_results(cells)
    _check(
        f"seeded.{ext}", render(build_table(frame, MAIN.model_copy(update={"blocks": None})), fmt)
    )
