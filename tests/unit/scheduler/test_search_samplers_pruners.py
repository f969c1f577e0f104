"""The search's sampler and pruner choices (orchestrator.scheduler.search)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.backends import get_backend
from orchestrator.grid import Cell
from orchestrator.scheduler.search import (
    make_pruner,
    make_sampler,
    study_max_steps,
    tpe_startup_trials,
)
from orchestrator.spec.search import SearchSpec


def _search(**extra: Any) -> SearchSpec:
    return SearchSpec.model_validate({
        "space": {"learning_rate": {"loguniform": [1e-5, 1e-2]}},
        "objective": {"metric": "val/acc"}, "trials": 12, **extra})


def _base(**settings: Any) -> Cell:
    return Cell(0, "c0", {}, {}, {"task": "arithmetic", **settings})


def test_hyperband_max_resource_is_the_cells_max_steps() -> None:
    search = _search(pruner="hyperband")
    backend = get_backend("embedded")
    steps = study_max_steps(search, backend, _base(max_steps=30))
    assert steps == 30
    assert make_pruner(search, steps)._max_resource == 30


def test_a_searched_max_steps_range_gives_its_top() -> None:
    search = SearchSpec.model_validate({
        "space": {"max_steps": {"int": [10, 50]}}, "objective": {"metric": "val/acc"},
        "trials": 4, "pruner": "hyperband"})
    assert study_max_steps(search, get_backend("embedded"), _base(max_steps=30)) == 50


def test_without_known_steps_hyperband_estimates_them() -> None:
    assert make_pruner(_search(pruner="hyperband"), None)._max_resource == "auto"


@pytest.mark.parametrize(("trials", "startup"), [(1, 2), (6, 2), (12, 4), (40, 10), (400, 10)])
def test_tpe_models_after_a_third_of_a_small_budget(trials: int, startup: int) -> None:
    search = _search(trials=trials, sampler="tpe", seed=0)
    assert tpe_startup_trials(search) == startup
    assert make_sampler(search, 0)._n_startup_trials == startup
