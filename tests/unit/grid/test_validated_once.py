"""A submit validates each cell's settings exactly once (issue 17's rule): the grid's
expansion keeps the model and judges the cell's demand (and a study's max_steps) from
it; a canary starts from its cell's model and its own settings are validated once when it
is planned (``kappa canary``, ``kappa submit --canary``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kit.cli import run_kappa
from pydantic import BaseModel

from orchestrator.backends.embedded.backend import EmbeddedBackend
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.errors import UserInputError
from orchestrator.grid.identity import canonical_json
from orchestrator.sweeps.canary import plan_canaries
from orchestrator.sweeps.submission import prepare

SWEEP = """\
name: once
backend: embedded
base: {task: arithmetic, max_steps: 5}
axes:
  baseline: [grpo, dapo]
  clip_ratio: [0.1, 0.2]
  seed: [0, 1, 2]
"""

SEARCH = SWEEP.replace("name: once", "name: once-search") + """\
search:
  space:
    kl_coef: {loguniform: [1.0e-4, 1.0e-1]}
  objective: {metric: val-core/arith-val/acc/mean@1, direction: maximize, at: final}
  trials: 2
"""


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every ``EmbeddedBackend.validate`` call, counted by the settings validated."""
    seen: Counter[str] = Counter()
    original = EmbeddedBackend.validate

    def spy(self: EmbeddedBackend, settings: Mapping[str, Any]) -> BaseModel:
        seen[canonical_json(dict(settings))] += 1
        return original(self, settings)

    monkeypatch.setattr(EmbeddedBackend, "validate", spy)
    return seen


def _resolved(validated: Counter[str]) -> set[str]:
    """What the settings validated resolve to (defaults filled in), as cells carry them."""
    return {canonical_json(EmbeddedSettings.model_validate_json(text).model_dump(mode="json"))
            for text in validated}


def test_a_sweep_submit_validates_each_cell_once(tmp_path: Path,
                                                 validations: Counter[str]) -> None:
    spec = tmp_path / "once.yaml"
    spec.write_text(SWEEP)
    prepared = prepare(spec)
    assert len(prepared.cells) == 12
    assert set(prepared.demands) == {c.cell_id for c in prepared.cells}
    assert {canonical_json(c.settings) for c in prepared.cells} == _resolved(validations)
    assert len(validations) == 12 and set(validations.values()) == {1}


def test_a_search_submit_validates_each_starting_cell_once(
        tmp_path: Path, validations: Counter[str]) -> None:
    spec = tmp_path / "search.yaml"
    spec.write_text(SEARCH)
    prepared = prepare(spec)
    assert len(prepared.plan.studies) == 12
    assert {s.max_steps for s in prepared.plan.studies} == {5}
    # (the search block's own checks validate base with the space's corners: no cell)
    assert [validations[canonical_json(s.settings)] for s in prepared.plan.studies] == [1] * 12


def test_the_canary_path_validates_each_cell_and_each_canary_once(
        tmp_path: Path, validations: Counter[str]) -> None:
    spec = tmp_path / "once.yaml"
    spec.write_text(SWEEP)
    prepared = prepare(spec, models=True)
    plan = plan_canaries(prepared)
    cells = {canonical_json(c.settings) for c in prepared.cells}
    canaries = [canonical_json(c.cell.settings) for c in plan.canaries]
    assert len(canaries) == 4  # seeds share one
    # Each grid cell at its submit's validation (the canary starts from that model), each
    # canary when it is planned; nothing twice.
    assert _resolved(validations) == cells | set(canaries)
    assert len(validations) == 12 + 4 and set(validations.values()) == {1}
    assert set(plan.sweep().demands) == {c.cell.cell_id for c in plan.canaries}


@pytest.mark.parametrize("command", [("canary", "--dry-run"), ("canary",),
                                     ("submit", "--canary")])
def test_the_canary_commands_validate_each_cell_and_each_canary_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        validations: Counter[str], command: tuple[str, ...]) -> None:
    from orchestrator.sweeps import canary

    def planned_only(*args: object, **kwargs: object) -> None:
        raise UserInputError("(the test stops here: its canaries are planned)")

    monkeypatch.setattr(canary, "run_canaries", planned_only)  # nothing runs or is written
    spec = tmp_path / "once.yaml"
    spec.write_text(SWEEP)
    ran = run_kappa(capsys, command[0], str(spec), *command[1:])
    assert ran.code == (0 if "--dry-run" in command else 2), ran.output
    assert len(validations) == 12 + 4 and set(validations.values()) == {1}
