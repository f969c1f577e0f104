"""The search's sampler and pruner choices (orchestrator.search.samplers)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.grid.plan import parse_plan
from orchestrator.search.samplers import make_pruner, make_sampler, tpe_startup_trials
from orchestrator.spec.search_block import SearchSpec


def _search(**extra: Any) -> SearchSpec:
    return SearchSpec.model_validate({
        "space": {"learning_rate": {"loguniform": [1e-5, 1e-2]}},
        "objective": {"metric": "val/acc"}, "trials": 12, **extra})


def _study_max_steps(space: str) -> int | None:
    """A study's most steps as its plan records them (base max_steps: 30)."""
    text = ("name: s\nbase: {task: arithmetic, max_steps: 30}\nsearch:\n"
            f"  space: {space}\n  objective: {{metric: val/acc}}\n  trials: 4\n")
    (study,) = parse_plan(text).sweep_plan().studies
    return study.max_steps


def test_hyperband_max_resource_is_the_cells_max_steps() -> None:
    search = _search(pruner="hyperband")
    steps = _study_max_steps("{learning_rate: {loguniform: [1.0e-5, 1.0e-2]}}")
    assert steps == 30
    assert make_pruner(search, steps)._max_resource == 30


def test_a_searched_max_steps_range_gives_its_top() -> None:
    assert _study_max_steps("{max_steps: {int: [10, 50]}}") == 50


def test_without_known_steps_hyperband_estimates_them() -> None:
    assert make_pruner(_search(pruner="hyperband"), None)._max_resource == "auto"


@pytest.mark.parametrize(("trials", "startup"), [(1, 2), (6, 2), (12, 4), (40, 10), (400, 10)])
def test_tpe_models_after_a_third_of_a_small_budget(trials: int, startup: int) -> None:
    search = _search(trials=trials, sampler="tpe", seed=0)
    assert tpe_startup_trials(search) == startup
    assert make_sampler(search, 0)._n_startup_trials == startup


def test_successive_halving_compares_trials_at_the_same_step_whenever_the_first_ends() -> None:
    """A trial that runs while the first one is still unfinished must record its rung values
    at the rung's step, not at the step it happens to be at when the first one ends (the
    cause of a flaky search test on a loaded machine: the best trial was pruned because an
    earlier, worse trial had recorded its rung-0 value at step 9 instead of step 1)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    steps = 12
    study = optuna.create_study(direction="maximize",
                                pruner=make_pruner(_search(pruner="successive_halving"), steps))

    def score(top: float, step: int) -> float:
        return top * step / steps

    first, worse = study.ask(), study.ask()
    for step in range(1, 10):  # the worse trial runs ahead while the first is unfinished
        worse.report(score(0.6, step), step)
        assert not worse.should_prune()
    for step in range(1, steps + 1):
        first.report(score(0.7, step), step)
    study.tell(first, score(0.7, steps))
    worse.report(score(0.6, 10), 10)
    worse.should_prune()
    best = study.ask()
    pruned_at = None
    for step in range(1, steps + 1):
        best.report(score(1.0, step), step)
        if best.should_prune():
            pruned_at = step
            break
    assert pruned_at is None, f"the best trial was pruned at step {pruned_at}"
