"""The verdict rules of docs/findings.md on numbers whose answer is known."""

from __future__ import annotations

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
    paired,
    t_verdict,
)


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
