"""Convergence step (docs/algorithms.md#convergence-step) on curves unlike the toy one."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.algorithms.convergence import convergence_step, fit_convergence

STEPS = np.arange(1, 301, dtype=float)


def _saturating(x: np.ndarray) -> np.ndarray:
    return 0.2 + 0.5 * (1.0 - np.exp(-x / 30.0))


def test_a_falling_curve_converges_where_it_stops_falling() -> None:
    # Condition (ii) only bounds gains still to come, so a settled decline is a plateau.
    rising = convergence_step(STEPS, _saturating(STEPS))
    falling = convergence_step(STEPS, 0.9 - _saturating(STEPS))
    assert rising is not None and falling == pytest.approx(rising)
    assert convergence_step(STEPS, 0.7 - 0.001 * STEPS) is None


def test_nan_points_are_dropped_before_the_fit() -> None:
    y = _saturating(STEPS)
    holed = y.copy()
    holed[::7] = np.nan
    keep = np.isfinite(holed)
    assert convergence_step(STEPS, holed) == convergence_step(STEPS[keep], y[keep])


def test_sparse_uneven_validation_steps_span_the_logged_range() -> None:
    every10 = np.arange(0, 301, 10, dtype=float)
    fit = fit_convergence(every10, _saturating(every10))
    assert fit is not None and fit.grid[0] == 0.0 and fit.grid[-1] == 300.0
    dense = convergence_step(STEPS, _saturating(STEPS))
    assert fit.step is not None and dense is not None and abs(fit.step - dense) < 10
    uneven = np.array([0, 1, 2, 5, 10, 20, 50, 100, 200, 300], dtype=float)
    step = convergence_step(uneven, _saturating(uneven))
    assert step is not None and 0 < step < 300


def test_a_plateau_reached_only_in_the_last_window_is_not_a_convergence() -> None:
    # The last w grid points have no y[g + w]: they are never flat (as in the definition).
    late = np.minimum(0.2 + 0.002 * STEPS, 0.2 + 0.002 * 285)
    assert convergence_step(STEPS, late) is None


def test_unsorted_and_repeated_steps_give_the_same_step() -> None:
    order = np.random.default_rng(0).permutation(STEPS.size)
    base = convergence_step(STEPS, _saturating(STEPS))
    assert convergence_step(STEPS[order], _saturating(STEPS)[order]) == pytest.approx(base)
    twice = np.r_[STEPS, STEPS]
    assert convergence_step(twice, _saturating(twice)) == pytest.approx(base)
