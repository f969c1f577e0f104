"""Statistics on known samples: t-intervals and the pooled interval of fixed groups."""

from __future__ import annotations

import math

import pytest

from orchestrator.analysis.stats import Interval, fixed_groups_interval, t_interval


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


def test_fixed_groups_interval_matches_the_pooled_formula() -> None:
    diffs = {"a": [1.0, 2.0, 3.0], "b": [4.0, 6.0]}
    iv = fixed_groups_interval(diffs)
    # estimate: mean of group means (2 and 5); pooled s² = (2 + 2) / 3; se = sqrt(s²/3 + s²/2)/2
    s2 = 4.0 / 3.0
    se = math.sqrt(s2 / 3 + s2 / 2) / 2
    from scipy.stats import t

    half = t.ppf(0.975, 3) * se
    assert iv.estimate == pytest.approx(3.5)
    assert (iv.low, iv.high, iv.n) == (pytest.approx(3.5 - half), pytest.approx(3.5 + half), 5)


def test_fixed_groups_ignore_differences_between_groups() -> None:
    # Groups far apart but each tight: between-group spread is not noise about the average.
    tight = fixed_groups_interval({"a": [0.10, 0.11, 0.09], "b": [-0.05, -0.04, -0.06]})
    assert tight.low is not None and tight.high is not None
    assert tight.high - tight.low < 0.05


def test_one_replicate_per_group_gives_no_interval() -> None:
    iv = fixed_groups_interval({"a": [1.0], "b": [2.0]})
    assert iv.low is None and iv.estimate == 1.5
    with pytest.raises(ValueError):
        fixed_groups_interval({"a": []})
