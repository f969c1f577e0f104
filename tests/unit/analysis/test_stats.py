"""Statistics on known samples: t-intervals and the paired bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from orchestrator.analysis.stats import (
    Interval,
    paired_bootstrap_columns,
    paired_bootstrap_delta,
    t_interval,
)


def test_t_interval_of_a_known_sample() -> None:
    # mean 3, sd sqrt(2.5), sem sqrt(0.5); t_{0.975, 4} = 2.7764451051977934
    iv = t_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    half = 2.7764451051977934 * math.sqrt(0.5)
    assert iv.estimate == 3.0
    assert iv.n == 5
    assert iv.low == pytest.approx(3.0 - half, abs=1e-12)
    assert iv.high == pytest.approx(3.0 + half, abs=1e-12)
    assert iv.half_width == pytest.approx(half, abs=1e-12)


def test_t_interval_two_values_uses_t_with_one_degree_of_freedom() -> None:
    iv = t_interval([0.0, 2.0], confidence=0.95)
    # sd = sqrt(2), sem = 1, t_{0.975, 1} = 12.706204736174698
    assert iv.half_width == pytest.approx(12.706204736174698, rel=1e-12)


def test_t_interval_single_value_has_no_interval_and_ignores_nan() -> None:
    iv = t_interval([0.7, float("nan")])
    assert iv == Interval(0.7, None, None, 1)
    assert not iv.excludes_zero
    with pytest.raises(ValueError):
        t_interval([float("nan")])


def test_paired_bootstrap_constant_difference_is_exact() -> None:
    iv = paired_bootstrap_delta([0.5, 0.6, 0.7], [0.6, 0.7, 0.8])
    assert iv.estimate == pytest.approx(0.1)
    assert iv.low == pytest.approx(0.1)
    assert iv.high == pytest.approx(0.1)
    assert iv.excludes_zero


def test_paired_bootstrap_is_deterministic_and_bounded_by_the_sample() -> None:
    base = np.array([50.0, 52.0, 54.0, 51.0])
    treat = base + np.array([10.0, 11.0, 12.0, 13.0])
    a = paired_bootstrap_delta(base, treat, seed=7)
    b = paired_bootstrap_delta(base, treat, seed=7)
    assert a == b
    assert a.estimate == pytest.approx(11.5)
    assert a.low is not None and a.high is not None
    assert 10.0 <= a.low < 11.5 < a.high <= 13.0
    assert a.excludes_zero


def test_paired_bootstrap_pairs_not_pools() -> None:
    # Large between-seed spread, tiny consistent gain: only pairing sees it.
    base = np.array([10.0, 50.0, 90.0])
    iv = paired_bootstrap_delta(base, base + 1.0)
    assert iv.excludes_zero
    mixed = paired_bootstrap_delta([0.0, 0.0, 0.0, 0.0], [1.0, -1.0, 2.0, -2.0])
    assert not mixed.excludes_zero


def test_paired_bootstrap_drops_incomplete_pairs_and_checks_shapes() -> None:
    iv = paired_bootstrap_delta([1.0, float("nan"), 3.0], [2.0, 5.0, 4.0])
    assert iv.n == 2
    assert iv.estimate == pytest.approx(1.0)
    with pytest.raises(ValueError):
        paired_bootstrap_delta([1.0, 2.0], [1.0])
    single = paired_bootstrap_delta([1.0], [3.0])
    assert single == Interval(2.0, None, None, 1)


def test_column_bootstrap_equals_the_single_column_call() -> None:
    rng = np.random.default_rng(3)
    base = rng.normal(50, 5, (6, 3))
    treat = base + rng.normal(2, 1, (6, 3))
    treat[2, 1] = np.nan  # column 1 has an incomplete pair: falls back
    got = paired_bootstrap_columns(base, treat, n_resamples=2000, seed=5)
    for j in range(3):
        want = paired_bootstrap_delta(base[:, j], treat[:, j], n_resamples=2000, seed=5)
        iv = got[j]
        assert iv is not None
        assert iv.estimate == pytest.approx(want.estimate)
        assert (iv.low, iv.high) == pytest.approx((want.low, want.high))
        assert iv.n == want.n
    assert got[1] is not None and got[1].n == 5
    empty = paired_bootstrap_columns(np.full((2, 1), np.nan), np.ones((2, 1)))
    assert empty == [None]
