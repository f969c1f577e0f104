"""Every shipped paper spec validates and plans; the slow test composes every cell with verl."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from orchestrator.grid.plan import plan
from orchestrator.spec.loader import load_spec

PAPER = Path(__file__).resolve().parents[3] / "experiments" / "paper"
COUNTS = {"table2": 24, "table3": 4, "kappa_study": 3, "entropy_study": 3,
          "spurious_rewards": 24}


def test_every_paper_spec_is_shipped() -> None:
    assert {p.stem for p in PAPER.glob("*.yaml")} == set(COUNTS)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_paper_spec_plans(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    monkeypatch.setenv("KAPPA_VERL_PREFLIGHT", "off")
    p = plan(load_spec(PAPER / f"{name}.yaml"))
    assert p.spec.backend == "verl"
    assert p.count == COUNTS[name]
    assert len({c.cell_id for c in p.cells}) == p.count


def test_table2_crosses_models_baselines_and_rb(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    monkeypatch.setenv("KAPPA_VERL_PREFLIGHT", "off")
    cells = plan(load_spec(PAPER / "table2.yaml")).cells
    combos = {(c.settings["model_path"], c.settings["baseline"], c.settings["reward_budget"])
              for c in cells}
    assert len(combos) == 24
    assert all(c.settings["learning_rate"] == 1e-6 and c.settings["group_size"] == 8
               and c.settings["prompts_per_step"] == 32 and c.settings["weight_decay"] == 0.1
               for c in cells)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed")
@pytest.mark.parametrize("name", sorted(COUNTS))
@pytest.mark.usefixtures("preflight_session")  # one compose worker for every spec
def test_paper_spec_composes_every_cell_against_verl(name: str, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    from orchestrator.backends import get_backend

    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))  # an empty cache: every cell composes
    monkeypatch.delenv("KAPPA_VERL_PREFLIGHT", raising=False)
    p = plan(load_spec(PAPER / f"{name}.yaml"))  # preflighted as one batch
    backend = get_backend("verl")
    backend.preflight({c.cell_id: backend.validate(c.settings)  # type: ignore[attr-defined]
                       for c in p.cells})
