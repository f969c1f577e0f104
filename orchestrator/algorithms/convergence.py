"""The convergence step of a validation-accuracy curve and a plateau test (first paper,
Appendix B.3; the definition and its constants: docs/algorithms.md#convergence-step). The
flatness test and the run search are exposed on their own, for any smoothed curve."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEGREE = 5
GRID_POINTS = 400
WINDOW_FRACTION = 0.10
RUN_FRACTION = 0.06
MIN_RUN = 10
EPS_FLOOR = 0.005
LOCAL_FRACTION = 0.02
REMAIN_FRACTION = 0.10
Points = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class ConvergenceFit:
    """Everything the convergence-step computation produced, for plotting and debugging."""

    grid: np.ndarray
    fitted: np.ndarray
    eps_local: float
    eps_remain: float
    window: int
    run: int
    index: int | None

    @property
    def step(self) -> float | None:
        """The convergence step (a grid value, in training steps), or ``None`` if none."""
        return None if self.index is None else float(self.grid[self.index])


def window_size(grid_points: int = GRID_POINTS) -> int:
    """``w = 0.10 · grid_points`` grid points."""
    return round(WINDOW_FRACTION * grid_points)


def run_length(grid_points: int = GRID_POINTS) -> int:
    """``max(10, 0.06 · grid_points)`` consecutive flat points."""
    return max(MIN_RUN, round(RUN_FRACTION * grid_points))


def plateau_mask(y: np.ndarray, eps_local: float, eps_remain: float, window: int) -> np.ndarray:
    """Which points of ``y`` are flat, locally (over ``window``) and for all that remains; a point
    without a full window after it never is."""
    y = np.asarray(y, dtype=float)
    n = y.size
    mask = np.zeros(n, dtype=bool)
    if window >= n:
        return mask
    # Running maximum from the right: max_{j >= g} y[j] for every g in one pass.
    remaining_max = np.maximum.accumulate(y[::-1])[::-1]
    head = np.arange(n - window)
    local_ok = np.abs(y[head + window] - y[head]) <= eps_local
    remain_ok = remaining_max[head] - y[head] <= eps_remain
    mask[head] = local_ok & remain_ok
    return mask


def first_sustained(mask: np.ndarray, run: int) -> int | None:
    """The earliest index that starts ``run`` consecutive ``True`` values, or ``None``."""
    count = 0
    for i, flag in enumerate(np.asarray(mask, dtype=bool)):
        count = count + 1 if flag else 0
        if count >= run:
            return i - run + 1
    return None


def fit_convergence(steps: Points, values: Points,
                    grid_points: int = GRID_POINTS) -> ConvergenceFit | None:
    """The convergence-step computation in full; ``None`` when there are too few points to fit."""
    x = np.asarray(steps, dtype=float)
    y = np.asarray(values, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"steps and values differ in shape: {x.shape} vs {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if np.unique(x).size <= DEGREE:
        return None
    # Polynomial.fit maps steps to [-1, 1] first, which keeps degree 5 well conditioned.
    poly = np.polynomial.Polynomial.fit(x, y, DEGREE)
    grid = np.linspace(x.min(), x.max(), grid_points)
    fitted = poly(grid)
    delta = float(fitted.max() - fitted.min())
    eps_local = max(EPS_FLOOR, LOCAL_FRACTION * delta)
    eps_remain = max(EPS_FLOOR, REMAIN_FRACTION * delta)
    window = window_size(grid_points)
    run = run_length(grid_points)
    mask = plateau_mask(fitted, eps_local, eps_remain, window)
    return ConvergenceFit(grid, fitted, eps_local, eps_remain, window, run,
                          first_sustained(mask, run))


def convergence_step(steps: Points, values: Points) -> float | None:
    """The convergence step of a validation-accuracy curve (docs/algorithms.md#convergence-step): a
    step on the 400-point grid, or ``None`` when the curve never settles or has fewer than six
    distinct steps."""
    fit = fit_convergence(steps, values)
    return None if fit is None else fit.step


def has_plateaued(steps: Points, values: Points) -> bool:
    """Whether the curve has reached its plateau by its last step (a stopping-rule test)."""
    return convergence_step(steps, values) is not None
