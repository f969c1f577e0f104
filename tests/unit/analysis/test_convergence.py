"""Convergence step (docs/algorithms.md#convergence-step) on synthetic curves with known
plateaus."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.algorithms.convergence import (
    convergence_step,
    first_sustained,
    fit_convergence,
    has_plateaued,
    plateau_mask,
    run_length,
    window_size,
)


def _reference_step(steps: np.ndarray, values: np.ndarray) -> float | None:
    """The definition written out as plainly as possible (loops, no shortcuts)."""
    coeffs = np.polyfit(steps, values, 5)
    grid = np.linspace(steps.min(), steps.max(), 400)
    y = np.polyval(coeffs, grid)
    delta = y.max() - y.min()
    eps_local = max(0.005, 0.02 * delta)
    eps_remain = max(0.005, 0.10 * delta)
    w = int(0.10 * 400)
    need = max(10, int(0.06 * 400))
    flat = []
    for g in range(400):
        ok = g + w < 400 and abs(y[g + w] - y[g]) <= eps_local and max(y[g:]) - y[g] <= eps_remain
        flat.append(ok)
    for g in range(400 - need + 1):
        if all(flat[g : g + need]):
            return float(grid[g])
    return None


def test_constants_match_the_definition() -> None:
    assert window_size() == 40
    assert run_length() == 24


def test_saturating_curve_converges_where_it_flattens() -> None:
    steps = np.arange(0, 1001, 10, dtype=float)
    values = 0.3 + 0.5 * (1.0 - np.exp(-steps / 150.0))
    step = convergence_step(steps, values)
    assert step is not None
    # By step 450 the curve is within 5% of its range from the plateau; by 800 within 0.5%.
    assert 300.0 < step < 800.0
    assert has_plateaued(steps, values)


def test_noisy_saturating_curve_converges_in_the_same_region() -> None:
    rng = np.random.default_rng(0)
    steps = np.arange(0, 1001, 10, dtype=float)
    values = 0.3 + 0.5 * (1.0 - np.exp(-steps / 150.0)) + rng.normal(0, 0.01, steps.size)
    step = convergence_step(steps, values)
    assert step is not None and 300.0 < step < 850.0


def test_still_rising_curve_has_not_converged() -> None:
    steps = np.arange(0, 1001, 10, dtype=float)
    values = 0.2 + 0.5 * steps / 1000.0
    assert convergence_step(steps, values) is None
    assert not has_plateaued(steps, values)


def test_flat_curve_converges_at_the_first_step() -> None:
    steps = np.arange(100, 600, 5, dtype=float)
    assert convergence_step(steps, np.full(steps.size, 0.42)) == 100.0


def test_too_few_points_gives_none() -> None:
    assert convergence_step([1, 2, 3, 4, 5], [0.1, 0.2, 0.3, 0.4, 0.5]) is None
    assert fit_convergence([1, 1, 1, 1, 1, 1, 1], [0.1] * 7) is None


def test_fit_reports_its_thresholds() -> None:
    steps = np.linspace(0, 100, 50)
    fit = fit_convergence(steps, 0.1 + 0.8 * (1 - np.exp(-steps / 10)))
    assert fit is not None
    delta = fit.fitted.max() - fit.fitted.min()
    assert fit.eps_local == pytest.approx(max(0.005, 0.02 * delta))
    assert fit.eps_remain == pytest.approx(max(0.005, 0.10 * delta))
    assert fit.grid.size == 400 and fit.grid[0] == 0 and fit.grid[-1] == 100


def test_plateau_mask_and_first_sustained() -> None:
    y = np.array([0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0])
    mask = plateau_mask(y, eps_local=0.01, eps_remain=0.01, window=2)
    assert mask.tolist() == [False, False, True, True, True, False, False]
    assert first_sustained(mask, 3) == 2
    assert first_sustained(mask, 4) is None
    # A later rise above the current value breaks "remaining" flatness.
    y2 = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0])
    assert not plateau_mask(y2, 0.01, 0.5, 1)[0]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    rate=st.floats(0.002, 0.05),
    top=st.floats(0.2, 0.9),
    noise_seed=st.integers(0, 1000),
)
def test_matches_a_plain_reference_implementation(rate: float, top: float, noise_seed: int) -> None:
    rng = np.random.default_rng(noise_seed)
    steps = np.arange(0, 500, 5, dtype=float)
    values = 0.1 + top * (1 - np.exp(-rate * steps)) + rng.normal(0, 0.005, steps.size)
    got = convergence_step(steps, values)
    want = _reference_step(steps, values)
    if want is None:
        assert got is None
    else:
        assert got == pytest.approx(want)
