"""The spec's ``stop:`` block: what it accepts, located errors at ``kappa validate``, the
schema, and reading it back from a stored spec."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import Problem, UserInputError
from orchestrator.grid.plan import parse_plan, stored_plan
from orchestrator.spec import parse_spec
from orchestrator.spec.loader import read_spec
from orchestrator.spec.model import Resources

HEAD = "name: s\nbackend: embedded\nbase: {max_steps: 10}\naxes:\n  seed: [0, 1]\n"
GOOD = HEAD + """\
resources: {gpus: 8, hours: 12}
stop:
  plateau: {metric: val-core/arith-val/acc/mean@1, min_steps: 40, patience: 20}
  threshold: {metric: val-core/arith-val/acc/mean@1, at_least: 0.95}
  diverged: [{metric: actor/entropy, below: 0.01, for: 5}, {metric: actor/pg_loss, nonfinite: true}]
  gpu_hours: 2000
"""


def problems(text: str) -> list[Problem]:
    with pytest.raises(UserInputError) as exc:
        parse_plan(text, "spec.yaml")
    return list(exc.value.problems)


def test_the_issue_example_is_valid() -> None:
    stop = parse_spec(GOOD, "spec.yaml").stop
    assert stop is not None and stop.has_rules and stop.gpu_hours == 2000
    assert stop.plateau is not None and (stop.plateau.min_steps, stop.plateau.patience) == (40, 20)
    assert stop.threshold is not None and stop.threshold.at_least == 0.95
    assert [r.consecutive for r in stop.diverged] == [5, 1]
    assert stop.diverged[1].nonfinite is True
    assert stop.metrics() == {"val-core/arith-val/acc/mean@1", "actor/entropy", "actor/pg_loss"}
    assert parse_spec(HEAD, "spec.yaml").stop is None


def test_every_problem_is_located_at_once() -> None:
    found = problems(HEAD + """\
stop:
  plateau: {metric: acc, min_steps: -1, patience: 0}
  threshold: {metric: acc, at_least: 0.9, at_most: 0.1}
  diverged:
    - {metric: e, below: 0.01, above: 3}
    - {metric: loss, nonfinite: true, paitence: 3}
    - {metric: e, below: "0.01", for: 0}
""")
    by_location = {p.location: p for p in found}
    assert set(by_location) == {
        "stop.plateau.min_steps", "stop.plateau.patience", "stop.threshold",
        "stop.diverged[0]", "stop.diverged[1].paitence", "stop.diverged[2].below",
        "stop.diverged[2].for"}
    assert by_location["stop.plateau.min_steps"].line == 7
    assert "exactly one of at_least" in by_location["stop.threshold"].message
    assert "exactly one of below, above or nonfinite" in by_location["stop.diverged[0]"].message
    unknown = by_location["stop.diverged[1].paitence"]
    assert (unknown.line, unknown.message) == (11, "unknown key")
    assert unknown.allowed is not None
    assert "for" in unknown.allowed and "min_steps" in unknown.allowed


def test_a_bad_stop_block_does_not_hide_the_grid_s_problems() -> None:
    found = problems(HEAD.replace("max_steps: 10", "max_stepz: 10")
                     + "stop: {gpu_hours: -3}\n")
    assert {p.location for p in found} >= {"stop.gpu_hours", "base.max_stepz"}


def test_a_cap_needs_cells_that_use_gpus() -> None:
    (problem,) = problems(HEAD + "stop: {gpu_hours: 100}\n")
    assert problem.location == "stop.gpu_hours" and problem.line == 6
    assert problem.fix is not None and "resources" in problem.fix


def test_no_infinity_or_nan_as_a_bound() -> None:
    found = problems(HEAD + "stop: {threshold: {metric: a, at_most: .nan}}\n")
    assert [p.location for p in found] == ["stop.threshold.at_most"]


def test_kappa_validate_exits_2_with_the_place(kappa: Any, tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(HEAD + "stop:\n  diverged: [{metric: e}]\n")
    code, _, err = kappa(["validate", str(spec)])
    assert code == 2 and "Traceback" not in err
    assert f"{spec}:7:" in err and "stop.diverged[0]" in err
    spec.write_text(GOOD)
    assert kappa(["validate", str(spec)])[0] == 0


def test_the_schema_describes_the_stop_block(kappa: Any) -> None:
    import json

    code, out, _ = kappa(["schema"])
    schema = json.loads(out)
    assert code == 0 and "stop" in schema["properties"]
    diverged = schema["$defs"]["DivergedRule"]
    assert "for" in diverged["properties"] and diverged["additionalProperties"] is False


def test_a_stored_plan_gives_its_rules_and_resources_back() -> None:
    good = stored_plan("s", parse_plan(GOOD).sweep_plan().to_json())
    assert good.stop is not None and good.stop.gpu_hours == 2000 and good.resources.gpus == 8
    head = stored_plan("s", parse_plan(HEAD).sweep_plan().to_json())
    assert (head.stop, head.resources) == (None, Resources())
    # A block an older or newer kappa wrote that does not validate here: an error that
    # says so and how to fix it, never "no rules" (the cap would silently vanish).
    stale = good.to_json().replace('"patience":20', '"patience":20,"window":3')
    with pytest.raises(UserInputError, match="stored plan of sweep s cannot be read") as exc:
        stored_plan("s", stale)
    assert "stop.plateau.window" in (exc.value.problems[0].found or "")


def test_together_names_axes_and_needs_a_rule_to_stop_on() -> None:
    spec = parse_spec(HEAD + "stop:\n  threshold: {metric: critic/acc/mean, at_least: 0.9}\n"
                             "  together: [seed]\n", "spec.yaml")
    assert spec.stop is not None and spec.stop.grouped and spec.stop.together == ("seed",)
    found = {p.location: p for p in problems(
        HEAD + "stop:\n  diverged: [{metric: actor/entropy, below: 0.01}]\n"
               "  together: [reward_budget, seed, seed]\n")}
    assert set(found) == {"stop.together[0]", "stop.together"}
    assert found["stop.together[0]"].allowed == "seed"
    assert "reward_budget" in (found["stop.together[0]"].found or "")
    messages = [p.message for p in problems(
        HEAD + "stop:\n  diverged: [{metric: actor/entropy, below: 0.01}]\n  together: [seed]\n")]
    assert any("needs a plateau or threshold rule" in m for m in messages)
    assert problems(HEAD + "stop: {together: seed}\n")[0].location == "stop.together"


def test_a_metric_the_backend_never_logs_is_refused_with_the_names_it_logs() -> None:
    found = {p.location: p for p in problems(
        HEAD + "stop:\n  plateau: {metric: val-core/arith-val/acc/mean@1}\n"
               "  diverged: [{metric: actor/entropi, below: 0.01},"
               " {metric: eval/x/mean@8, nonfinite: true}]\n")}
    assert list(found) == ["stop.diverged[0].metric"]  # benchmark names and k are free
    problem = found["stop.diverged[0].metric"]
    assert problem.found == "actor/entropi" and problem.fix == "did you mean 'actor/entropy'?"
    assert "actor/entropy, " in (problem.allowed or "")
    assert "never fire" in problem.message


def test_a_backend_that_cannot_know_its_metrics_gets_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    from orchestrator.backends.verl.backend import VerlBackend

    assert VerlBackend().known_metrics() is None
    spec = HEAD.replace("embedded", "verl").replace("{max_steps: 10}", "{}")
    with caplog.at_level(logging.WARNING, "orchestrator.spec"):
        reading = read_spec(spec + "stop:\n  diverged: [{metric: actor/entropi, below: 0.01}]\n")
    assert not [p for p in reading.problems if p.location.startswith("stop")]
    assert "verl backend cannot list the metrics" in caplog.text
    assert "actor/entropi" in caplog.text
