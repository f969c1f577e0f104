"""What Optuna gets from the spec's ``search:`` block: distributions, sampler, pruner,
and each study's trial budget."""

from __future__ import annotations

import math
from typing import Any

from orchestrator.spec.search_block import SearchSpec


def distributions(search: SearchSpec) -> dict[str, Any]:
    """Optuna distributions of the space (the grid sampler's points are categorical)."""
    import optuna.distributions as d

    out: dict[str, Any] = {}
    points = search.grid_points()
    for name, dist in search.space.items():
        if search.sampler == "grid" and dist.categorical is None:
            out[name] = d.CategoricalDistribution(dist.grid_values(points))
        elif dist.categorical is not None:
            out[name] = d.CategoricalDistribution(list(dist.categorical))
        elif dist.integer is not None:
            out[name] = d.IntDistribution(dist.integer[0], dist.integer[1])
        else:
            low, high = dist.bounds
            out[name] = d.FloatDistribution(low, high, log=dist.loguniform is not None)
    return out


def trial_budget(search: SearchSpec) -> int:
    """Trials per study (a grid is never asked for more than its points)."""
    if search.sampler != "grid":
        return search.trials
    points = search.grid_points()
    return min(search.trials, math.prod(len(d.grid_values(points))
                                        for d in search.space.values()))


def make_sampler(search: SearchSpec, offset: int, study_index: int = 0) -> Any:
    """The spec's sampler; a seeded one is re-seeded past the ``offset`` trials already
    asked, so a resumed study does not replay its first proposals (and each study of a
    sweep draws its own sequence)."""
    import optuna.samplers as s

    seed = None if search.seed is None else (
        search.seed * 100_003 + study_index * 7_919 + offset) % 2**32
    if search.sampler == "tpe":
        # Optuna's default (10 random trials before TPE models anything) would make a
        # small budget a random search; a third of the budget, 2 to 10, keeps TPE's role.
        return s.TPESampler(seed=seed, n_startup_trials=tpe_startup_trials(search))
    seeded = {"random": s.RandomSampler, "gp": s.GPSampler, "cmaes": s.CmaEsSampler}
    if search.sampler in seeded:
        return seeded[search.sampler](seed=seed)
    if search.sampler == "qmc":
        return s.QMCSampler(seed=search.seed, scramble=True)  # its sequence is the record
    class _AskTellGrid(s.GridSampler):
        # Optuna's grid sampler stops ``study.optimize`` once the grid is used up; with
        # ask-and-tell there is no optimize to stop (the budget is capped at the grid).
        def after_trial(self, *args: Any, **kwargs: Any) -> None:
            return None

    points = search.grid_points()
    return _AskTellGrid({n: d.grid_values(points) for n, d in search.space.items()},
                        seed=search.seed)


def tpe_startup_trials(search: SearchSpec) -> int:
    """Random trials before TPE takes over: a third of the budget, 2 to 10."""
    return max(2, min(10, search.trials // 3))


def make_pruner(search: SearchSpec, max_steps: int | None = None) -> Any:
    """The spec's pruner; a trial's resource is its training step. Hyperband's
    ``max_resource`` and successive halving's first rung come from the study's
    ``max_steps`` where the backend knows it: Optuna's ``auto`` takes them from the first
    finished trial, too small if a stopping rule ended it early, and trials running
    before then record rung values at whatever step they reached."""
    import optuna.pruners as p

    if search.pruner == "median":
        return p.MedianPruner(n_startup_trials=max(2, min(5, search.trials // 4)))
    if search.pruner == "successive_halving":
        return p.SuccessiveHalvingPruner(
            min_resource=max(1, max_steps // 100) if max_steps else "auto")
    if search.pruner == "hyperband":
        return p.HyperbandPruner(max_resource=max_steps if max_steps else "auto")
    return p.NopPruner()

