"""The spec's ``search:`` block: what it accepts, located errors (model and backend), the
grid sampler's points, and reading it back from a stored spec."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from orchestrator.errors import Problem, UserInputError
from orchestrator.grid.plan import parse_plan, stored_plan
from orchestrator.spec import parse_spec
from orchestrator.spec.search_block import Distribution, SearchSpec, with_values

HEAD = "name: s\nbackend: embedded\nbase: {max_steps: 10}\naxes:\n  baseline: [grpo, dapo]\n"
GOOD = HEAD + """\
search:
  space:
    kl_coef: {loguniform: [1.0e-4, 1.0e-1]}
    reward_correct: {categorical: [1, 2, 5]}
    entropy_coef: {uniform: [0.0, 0.02]}
    model.n_layers: {int: [1, 3]}
  objective: {metric: val-core/arith-val/acc/mean@1, direction: maximize, at: final}
  trials: 40
  parallel: 4
  sampler: tpe
  pruner: median
"""


def problems(text: str) -> list[Problem]:
    with pytest.raises(UserInputError) as exc:
        parse_spec(text, "spec.yaml")
    return list(exc.value.problems)


def _with(block: str) -> str:
    return HEAD + "search:\n" + block


def test_the_issue_example_is_valid() -> None:
    search = parse_spec(GOOD, "spec.yaml").search
    assert search is not None and search.trials == 40 and search.parallel == 4
    assert search.space["kl_coef"].loguniform == (1.0e-4, 1.0e-1)
    assert search.space["model.n_layers"].integer == (1, 3)
    assert search.space["reward_correct"].categorical == (1, 2, 5)
    # The sweep's stored plan gives the block back; a spec without one plans no search.
    assert stored_plan("s", parse_plan(GOOD).sweep_plan().to_json()).search == search
    assert parse_plan(HEAD).sweep_plan().search is None


@pytest.mark.parametrize(("entry", "words"), [
    ("{uniform: [0.5, 0.1]}", "low > high"),
    ("{loguniform: [0.0, 0.1]}", "low > 0"),
    ("{loguniform: [-1.0, 0.1]}", "low > 0"),
    ("{categorical: []}", "at least one value"),
    ("{uniform: [0, 1], categorical: [1]}", "exactly one"),
    ("{normal: [0, 1]}", "unknown key"),
    ("{int: [0.5, 2]}", "integer"),
])
def test_bad_distributions_are_located(entry: str, words: str) -> None:
    found = problems(_with(f"  space: {{kl_coef: {entry}}}\n  objective: {{metric: m}}\n"
                           "  trials: 4\n"))
    assert any(p.location.startswith("search.space.kl_coef") and words in p.message
               for p in found), found
    assert all(p.line is not None for p in found)


@pytest.mark.parametrize(("line", "where", "words"), [
    ("  sampler: foo\n", "search.sampler", "'tpe', 'gp', 'cmaes', 'random', 'qmc' or 'grid'"),
    ("  pruner: bar\n", "search.pruner",
     "'median', 'successive_halving', 'hyperband' or 'none'"),
    ("  parallel: 0\n", "search.parallel", "greater than or equal to 1"),
])
def test_unknown_sampler_pruner_and_bounds(line: str, where: str, words: str) -> None:
    found = problems(_with("  space: {kl_coef: {uniform: [0, 1]}}\n  objective: {metric: m}\n"
                           "  trials: 4\n" + line))
    assert [p.location for p in found] == [where] and words in found[0].message


def test_trials_bounds_and_metric_shape() -> None:
    found = problems(_with("  space: {kl_coef: {uniform: [0, 1]}}\n"
                           "  objective: {metric: 'has space'}\n  trials: 100000\n"))
    assert {p.location for p in found} == {"search.trials", "search.objective.metric"}


def test_settings_the_backend_lacks_or_rejects() -> None:
    found = problems(_with(
        "  space:\n    kl_coefficient: {uniform: [0, 1]}\n    baseline: {categorical: [grpo]}\n"
        "    max_steps: {int: [-3, 5]}\n  objective: {metric: m}\n  trials: 4\n"))
    by = {p.location: p for p in found}
    assert set(by) == {"search.space.kl_coefficient", "search.space.baseline",
                       "search.space.max_steps"}
    assert "kl_coef" in (by["search.space.kl_coefficient"].fix or "")  # did you mean
    assert "both an axis and searched" in by["search.space.baseline"].message
    assert "max_steps=-3" in by["search.space.max_steps"].message


def test_grid_points_fit_the_budget() -> None:
    search = SearchSpec.model_validate({
        "space": {"a": {"uniform": [0, 1]}, "b": {"loguniform": [1e-4, 1e-1]},
                  "c": {"categorical": [1, 2]}},
        "objective": {"metric": "m"}, "trials": 18, "sampler": "grid"})
    assert search.grid_points() == 3  # 3 x 3 x 2 = 18
    logs = search.space["b"].grid_values(3)
    assert math.isclose(logs[0], 1e-4) and math.isclose(logs[1], 1e-2 ** 1.25, rel_tol=1e-9)
    assert Distribution.model_validate({"int": [1, 3]}).grid_values(5) == [1, 2, 3]
    assert Distribution.model_validate({"int": [0, 100]}).grid_values(3) == [0, 50, 100]


def test_with_values_sets_dotted_names_without_touching_the_input() -> None:
    base = {"model": {"d_model": 64}, "seed": 1}
    out = with_values(base, {"model.n_layers": 2, "kl_coef": 0.1})
    assert out == {"model": {"d_model": 64, "n_layers": 2}, "seed": 1, "kl_coef": 0.1}
    assert base == {"model": {"d_model": 64}, "seed": 1}


def test_kappa_validate_reports_search_problems(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(_with("  space: {kl_coef: {loguniform: [0, 1]}}\n  objective: {metric: m}\n"
                          "  trials: 4\n"))
    found = problems(spec.read_text())
    assert found[0].line == 7 and found[0].location == "search.space.kl_coef"
