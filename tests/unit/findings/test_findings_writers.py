"""Each findings section writer, fed a made-up finished sweep whose answer is known.

The numbers are synthetic (drawn here, with the seed printed on failure); the writers are
the real ones that ``bench/findings.py`` runs after each study.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import findings_kappa as fk
import findings_studies as fs

SEED = 20261202


@dataclass
class FakeSweep:
    """What a writer reads from a finished sweep: cells, convergence, curves, a table."""

    name: str
    cells: pd.DataFrame
    conv: pd.DataFrame = field(default_factory=pd.DataFrame)
    long: pd.DataFrame = field(default_factory=pd.DataFrame)

    def convergence(self) -> pd.DataFrame:
        return self.conv

    def table(self, *args: str) -> str:
        return f"| table of {self.name} {' '.join(args)} |"

    def curves(self, patterns: list[str]) -> pd.DataFrame:
        return self.long[self.long["metric"].isin(patterns)]


def _cells(axes: dict[str, list[Any]], metrics: Any) -> pd.DataFrame:
    rows = []
    for i, values in enumerate(itertools.product(*axes.values())):
        cell = dict(zip(axes, values, strict=True))
        rows.append({"cell_id": f"c{i}", "state": "succeeded",
                     **{f"axis.{k}": v for k, v in cell.items()},
                     **{f"metric.{k}": v for k, v in metrics(cell).items()}})
    return pd.DataFrame(rows)


def _curves(cells: pd.DataFrame, steps: int, series: Any) -> pd.DataFrame:
    rows = []
    axis_cols = [c for c in cells.columns if c.startswith("axis.")]
    for record in cells.to_dict("records"):
        axes = {c.removeprefix("axis."): record[c] for c in axis_cols}
        for metric, values in series(axes, steps).items():
            rows += [{"cell_id": record["cell_id"], "step": s, "metric": metric, "value": v,
                      **{c: record[c] for c in axis_cols}} for s, v in values.items()]
    return pd.DataFrame(rows)


@pytest.fixture(autouse=True)
def figures_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fs, "FIGURES", tmp_path / "docs" / "img" / "findings")
    monkeypatch.setattr(fs, "ROOT", tmp_path)
    print(f"random seed {SEED}")


def test_table2_rb_gain_reproduces() -> None:
    rng = np.random.default_rng(SEED)
    cells = _cells({"baseline": ["grpo", "drgrpo", "dapo"], "reward_budget": [False, True],
                    "seed": [0, 1, 2]},
                   lambda c: {f"eval/{b}/mean@8": 0.5 + 0.05 * c["reward_budget"]
                              + 0.005 * rng.standard_normal() for b in ("x", "y")})
    text = fs.write_table2(FakeSweep("toy-table2", cells))  # type: ignore[arg-type]
    assert "**Verdict: reproduces.**" in text and "| table of toy-table2  |" in text


def test_the_300_step_table2_is_its_own_finding_with_the_same_rule() -> None:
    rng = np.random.default_rng(SEED)
    cells = _cells({"baseline": ["grpo", "kl_cov"], "reward_budget": [False, True],
                    "seed": [3, 4, 5]},
                   lambda c: {"eval/x/mean@8": 0.5 - 0.03 * c["reward_budget"]
                              + 0.003 * rng.standard_normal()})
    text = fs.write_table2_300(FakeSweep("toy-table2-300", cells))  # type: ignore[arg-type]
    assert text.startswith("### 1b. ") and "**Verdict: contradicts.**" in text
    assert "`bench/findings.py --only table2_300`" in text and "<!-- summary | 1b |" in text


def test_table3_needs_rb_to_help_with_and_without_kl() -> None:
    rng = np.random.default_rng(SEED)
    cells = _cells({"use_kl_loss": [True, False], "reward_budget": [False, True],
                    "seed": [0, 1, 2, 3]},
                   lambda c: {"eval/x/mean@8": 0.5 + (0.04 if c["reward_budget"] and
                                                      c["use_kl_loss"] else 0.0)
                              + 0.002 * rng.standard_normal()})
    text = fs.write_table3(FakeSweep("toy-table3", cells))  # type: ignore[arg-type]
    assert "**Verdict: inconclusive.**" in text  # RB helps with KL only


def test_kappa_smaller_converges_later() -> None:
    late = {"k5000": 40.0, "k2000": 60.0, "k200": 90.0}
    cells = _cells({"kappa": list(late), "seed": [0, 1, 2]},
                   lambda c: {"val-core/arith-val/acc/mean@1": 0.7})
    conv = pd.DataFrame([{"cell_id": r["cell_id"], "state": "succeeded",
                          "kappa": r["axis.kappa"], "seed": r["axis.seed"],
                          "convergence_step": late[r["axis.kappa"]] + r["axis.seed"]}
                         for r in cells.to_dict("records")])
    long = _curves(cells, 50, lambda a, n: {fs.VAL_CURVE: {
        s: min(0.8, 0.4 + s / late[a["kappa"]] * 0.4) for s in range(0, n + 1, 5)}})
    sweep = FakeSweep("toy-kappa", cells, conv, long)
    text = fk.write_kappa(sweep)  # type: ignore[arg-type]
    assert "**Verdict: reproduces.**" in text
    assert (fs.FIGURES / "kappa_accuracy.png").stat().st_size > 1000


def test_entropy_intervention_without_lasting_gain() -> None:
    rng = np.random.default_rng(SEED)
    cells = _cells({"intervention": ["none", "entropy_loss", "entropy_reward"],
                    "seed": [0, 1, 2]},
                   lambda c: {"val-core/arith-val/acc/mean@1": 0.7
                              + 0.001 * rng.standard_normal()})

    def series(axes: dict[str, Any], n: int) -> dict[str, dict[int, float]]:
        bump = 0.0 if axes["intervention"] == "none" else 0.05
        return {fs.ENTROPY: {s: 0.2 + (bump if s <= fs.INTERVENTION_STEPS else 0.0)
                             + 0.001 * axes["seed"] for s in range(1, n + 1)},
                fs.VAL_CURVE: {s: 0.7 for s in range(0, n + 1, 10)}}

    sweep = FakeSweep("toy-entropy", cells, long=_curves(cells, 150, series))
    text = fs.write_entropy(sweep)  # type: ignore[arg-type]
    assert "**Verdict: reproduces.**" in text


def test_spurious_clipping_lowers_entropy_and_does_not_help() -> None:
    rng = np.random.default_rng(SEED)
    cells = _cells({"clip_ratio": [0.2, 0.1, float("inf")], "group_size": [8, 16],
                    "seed": [0, 1, 2]},
                   lambda c: {"val-core/arith-val/acc/mean@1": 0.3
                              + 0.001 * rng.standard_normal()})

    def series(axes: dict[str, Any], n: int) -> dict[str, dict[int, float]]:
        slope = -0.001 if np.isfinite(axes["clip_ratio"]) else 0.001
        return {fs.ENTROPY: {s: 0.2 + slope * s + 0.0001 * axes["seed"]
                             for s in range(1, n + 1)},
                "actor/pg_clipfrac": {s: 0.01 if np.isfinite(axes["clip_ratio"]) else 0.0
                                      for s in range(1, n + 1)}}

    sweep = FakeSweep("toy-spurious", cells, long=_curves(cells, 60, series))
    text = fs.write_spurious(sweep)  # type: ignore[arg-type]
    assert "**Finding 5 verdict: reproduces.**" in text
    assert "**Finding 6 verdict: reproduces.**" in text
    assert [line.split("|")[1].strip() for line in text.splitlines()
            if line.startswith(fs.SUMMARY)] == ["5", "6"]
    # The rerun with clipping pressure: the same rules, its own findings and figure.
    again = fs.write_spurious_pressure(sweep)  # type: ignore[arg-type]
    assert again.startswith("### 5b–6b. Random rewards and clipping, with pressure")
    assert "**Finding 5b verdict: reproduces.**" in again
    assert [line.split("|")[1].strip() for line in again.splitlines()
            if line.startswith(fs.SUMMARY)] == ["5b", "6b"]
    assert "spurious_pressure_entropy.png" in again


def test_the_page_keeps_studies_not_rerun_and_sums_them_up(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import findings

    doc = tmp_path / "findings.md"
    doc.write_text(f"intro\n{findings.BEGIN}\nold\n{findings.END}\noutro\n")
    monkeypatch.setattr(findings, "DOC", doc)
    row = fs.summary("1", "claim one", "paper", "+1", "reproduces", "why", "table2")
    findings.rewrite_doc({"table2": f"<!-- study:table2 -->\nfirst\n{row}"})
    row3 = fs.summary("3", "claim three", "paper", "+2", "inconclusive", "why", "kappa")
    findings.rewrite_doc({"kappa": f"<!-- study:kappa -->\nthird\n{row3}"})
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old" not in text
    assert text.index("first") < text.index("third")
    assert "| 1 | claim one |" in text and "| 3 | claim three |" in text
    assert text.index("### Summary") < text.index("first")


@pytest.mark.parametrize(("late", "expected"), [
    # κ = 50 never settles within 150 steps (censored there), κ = 2 settles early and low:
    # the claim's first half goes the other way.
    ({"k50": None, "k20": 100.0, "k2": 30.0}, "contradicts"),
    ({"k50": 40.0, "k20": 80.0, "k2": None}, "reproduces"),
])
def test_scaled_kappa_counts_unsettled_runs_at_the_budget(late: dict[str, float | None],
                                                          expected: str) -> None:
    ceiling = {"k50": 0.85, "k20": 0.8, "k2": 0.6}
    cells = _cells({"kappa": list(late), "seed": [0, 1, 2, 3, 4]},
                   lambda c: {"val-core/arith-val/acc/mean@1": ceiling[c["kappa"]]})
    conv = pd.DataFrame([{"cell_id": r["cell_id"], "state": "succeeded",
                          "kappa": r["axis.kappa"], "seed": r["axis.seed"],
                          "convergence_step": (None if late[r["axis.kappa"]] is None
                                               else late[r["axis.kappa"]] + r["axis.seed"])}
                         for r in cells.to_dict("records")])
    long = _curves(cells, 150, lambda a, n: {fs.VAL_CURVE: {
        s: min(ceiling[a["kappa"]], 0.45 + s / 100 * (1 + a["seed"] / 10))
        for s in range(0, n + 1, 5)}})
    text = fk.write_kappa_scaled(FakeSweep("toy-kappa-scaled", cells, conv, long))  # type: ignore[arg-type]
    assert f"**Verdict: {expected}.**" in text
    assert "counts as converging at step 150 (5 of 15 runs)" in text
    assert (fs.FIGURES / "kappa_scaled_accuracy.png").stat().st_size > 1000
