"""The sweep plan: made once per submit (the YAML read once, the cells preflighted as one
batch), stored as JSON, read back equal; a stored plan that does not read is an error."""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from orchestrator import backends
from orchestrator.errors import UserInputError
from orchestrator.grid.plan import SweepPlan, load_plan, stored_plan
from orchestrator.spec.stop_block import StopRules

SPEC = """\
name: counted
backend: embedded
base: {max_steps: 10}
axes:
  seed: [0, 1, 2]
  learning_rate: [1.0e-3, 2.0e-3]
resources: {gpus: 1, hours: 2}
retries: 1
stop: {gpu_hours: 5, plateau: {metric: val-core/arith-val/acc/mean@1, patience: 3}}
"""

SEARCH = """\
name: searched
backend: embedded
base: {max_steps: 10}
axes:
  seed: [0, 1]
search:
  space: {learning_rate: {loguniform: [1.0e-4, 1.0e-2]}}
  objective: {metric: val/acc}
  trials: 4
"""


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Counts of YAML parses, validations and preflight batches while planning."""
    import orchestrator.spec.loader as loader

    seen: dict[str, list[Any]] = {"yaml": [], "validate": [], "preflight": []}
    real_load = loader.load_yaml

    def load_yaml(text: str, filename: str) -> Any:
        seen["yaml"].append(filename)
        return real_load(text, filename)

    monkeypatch.setattr(loader, "load_yaml", load_yaml)
    real = type(backends.get_backend("embedded"))

    class Counting(real):  # type: ignore[misc, valid-type]
        def validate(self, settings: Mapping[str, Any]) -> BaseModel:
            seen["validate"].append(dict(settings))
            return super().validate(settings)

        def preflight(self, cells: Mapping[str, BaseModel]) -> None:
            seen["preflight"].append(dict(cells))

    module = types.ModuleType("kappa_plan_test_backends")
    module.Backend = Counting  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(backends.BACKENDS, "embedded", f"{module.__name__}:Backend")
    return seen


def test_a_submit_reads_the_yaml_once_and_preflights_one_batch(
    tmp_path: Path, calls: dict[str, list[Any]]
) -> None:
    from orchestrator.sweeps.submission import prepare

    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    prepared = prepare(path)
    assert calls["yaml"] == [str(path)]
    assert len(calls["preflight"]) == 1  # one batch, not one call per cell
    (batch,) = calls["preflight"]
    # every cell validated once (its demand judged from the model); the covering cells
    # (one per distinct combination) preflighted as the one batch
    assert len(batch) <= len(calls["validate"]) == len(prepared.cells) == 6
    plan = prepared.plan
    assert (plan.name, plan.backend, plan.cell_count, plan.retries) == ("counted", "embedded",
                                                                        6, 1)
    assert plan.axes == ("seed", "learning_rate") and plan.gpu_hours == 12
    assert plan.stop is not None and plan.stop.gpu_hours == 5


def test_a_stored_plan_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "search.yaml"
    path.write_text(SEARCH)
    plan = load_plan(path).sweep_plan()
    assert plan.search is not None and len(plan.studies) == 2
    assert [s.axes for s in plan.studies] == [{"seed": 0}, {"seed": 1}]
    assert all(s.max_steps == 10 for s in plan.studies)
    again = stored_plan("searched", plan.to_json())
    assert again == plan
    assert again.studies[1].cell() == load_plan(path).cells[1]


def test_a_missing_or_corrupt_stored_plan_is_an_error_never_no_rules() -> None:
    plan = SweepPlan(name="s", backend="embedded", stop=StopRules(gpu_hours=5))
    with pytest.raises(UserInputError, match="sweep s has no stored plan") as missing:
        stored_plan("s", None)
    assert "kappa submit" in (missing.value.problems[0].fix or "")
    broken = plan.to_json().replace('"gpu_hours":5.0', '"gpu_hours":"lots"')
    for text in (broken, "{not json", plan.to_json().replace('"format":1', '"format":9')):
        with pytest.raises(UserInputError, match="stored plan of sweep s cannot be read") as bad:
            stored_plan("s", text)
        (problem,) = bad.value.problems
        assert problem.location == "plan" and "kappa submit" in (problem.fix or "")
