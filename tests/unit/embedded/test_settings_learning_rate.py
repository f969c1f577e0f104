"""The embedded trainer's learning rates are bounded by what float32 training holds: a
rate of 1e39 validated and the first optimizer step overflowed (issue 19, 6); the
evaluation temperature divides logits as the sampling one does, with the same bounds."""

from __future__ import annotations

import pytest

from orchestrator.backends.rl_settings import MAX_LEARNING_RATE
from orchestrator.errors import Problem, UserInputError
from orchestrator.grid.expand import expand
from orchestrator.limits import MAX_SCALE
from orchestrator.spec.loader import parse_spec


def _problems(text: str) -> list[Problem]:
    with pytest.raises(UserInputError) as exc:
        expand(parse_spec(text, "spec.yaml"))
    return list(exc.value.problems)


@pytest.mark.parametrize("setting", ["learning_rate", "warm_start.learning_rate"])
def test_a_learning_rate_past_float32_is_refused_with_the_fix(setting: str) -> None:
    outer, _, inner = setting.rpartition(".")

    def spec(value: str) -> str:
        leaf = f"{{{inner}: {value}}}" if outer else value
        return f"name: x\nbase: {{{outer or inner}: {leaf}}}\n"

    expand(parse_spec(spec(repr(MAX_LEARNING_RATE)), "spec.yaml"))  # the edge passes
    (problem,) = _problems(spec("1.0e+39"))
    assert problem.location == f"base.{setting}" and problem.line == 2, problem
    assert "float32" in problem.message and f"use at most {MAX_LEARNING_RATE:g}" in \
        problem.message, problem.message
    (zero,) = _problems(spec("0"))
    assert zero.location == f"base.{setting}" and "greater than 0" in zero.message


def test_the_bound_is_the_scale_every_float32_setting_keeps_to() -> None:
    assert MAX_LEARNING_RATE == MAX_SCALE


@pytest.mark.parametrize("value", ["1.0e+39", "1.0e-39", "0"])
def test_an_evaluation_temperature_float32_cannot_divide_by_is_refused(value: str) -> None:
    (problem,) = _problems(f"name: x\naxes:\n  eval_temperature: [{value}]\n")
    assert problem.location == "axes.eval_temperature[0]" and problem.line == 3
