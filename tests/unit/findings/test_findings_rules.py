"""The verdict rules of docs/findings.md on numbers whose answer is known."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from findings_rules import (
    CONTRADICTS,
    INCONCLUSIVE,
    NOT_TESTED,
    REPRODUCES,
    all_reproduce,
    fixed_groups_interval,
    paired,
    t_verdict,
)


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


@pytest.mark.parametrize(("diffs", "rule", "expected"), [
    ([0.05, 0.06, 0.04, 0.05], "directional", REPRODUCES),
    ([-0.05, -0.06, -0.04, -0.05], "directional", CONTRADICTS),
    ([0.05, -0.06, 0.04, -0.05], "directional", INCONCLUSIVE),
    ([0.001, -0.002, 0.0, 0.001], "no_gain", REPRODUCES),
    ([0.05, 0.06, 0.04, 0.05], "no_gain", CONTRADICTS),
    ([0.10, -0.10, 0.12, -0.08], "no_gain", INCONCLUSIVE),
    ([], "directional", NOT_TESTED),
])
def test_verdicts(diffs: list[float], rule: str, expected: str) -> None:
    assert t_verdict(diffs, "claim", rule).verdict == expected


def test_pairs_only_what_both_sides_have() -> None:
    assert paired({0: 1.0, 1: 2.0, 2: float("nan")}, {1: 1.5, 2: 0.0, 3: 9.0}) == [0.5]


def test_a_finding_of_several_parts() -> None:
    rng = np.random.default_rng(0)
    up = t_verdict(list(0.05 + 0.001 * rng.standard_normal(5)), "up")
    flat = t_verdict(list(0.05 * rng.standard_normal(5)), "flat")
    assert all_reproduce([up, up]) == REPRODUCES
    assert all_reproduce([up, flat]) == INCONCLUSIVE
    assert all_reproduce([up, t_verdict([], "none")]) == NOT_TESTED
