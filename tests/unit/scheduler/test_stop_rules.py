"""Stopping rules on synthetic metric histories (pure functions; no scheduler)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from orchestrator.algorithms.convergence import has_plateaued
from orchestrator.spec.stop_block import DivergedRule, PlateauRule, StopRules, ThresholdRule
from orchestrator.stopping.rules import (
    MetricHistory,
    PlateauCache,
    diverged_step,
    first_stop,
    plateau_step,
    pruned,
    threshold_step,
)

NAN, INF = math.nan, math.inf


def pts(values: list[float], every: int = 1, first: int = 1) -> list[tuple[int, float]]:
    return [(first + i * every, v) for i, v in enumerate(values)]


def saturating(n: int, every: int = 10, rate: float = 0.08) -> list[tuple[int, float]]:
    """A validation curve that rises and settles at 0.8 (what plateau is for)."""
    return [(s, 0.8 - 0.6 * math.exp(-rate * s)) for s in range(0, n * every, every)]


# -- threshold -------------------------------------------------------------------------
def test_threshold_at_least_and_at_most() -> None:
    rising = pts([0.1, 0.4, 0.5, 0.7])
    assert threshold_step(ThresholdRule(metric="m", at_least=0.5), rising) == 3
    assert threshold_step(ThresholdRule(metric="m", at_least=0.9), rising) is None
    falling = pts([3.0, 2.0, 0.5, 0.1])
    assert threshold_step(ThresholdRule(metric="m", at_most=0.5), falling) == 3


def test_threshold_waits_for_min_steps_and_ignores_nan() -> None:
    points = pts([0.9, NAN, 0.95, 0.2, 0.99])
    assert threshold_step(ThresholdRule(metric="m", at_least=0.9, min_steps=2), points) == 3
    assert threshold_step(ThresholdRule(metric="m", at_least=0.9), pts([NAN, NAN])) is None
    # A non-monotone curve: the first time it reached the target counts.
    assert threshold_step(ThresholdRule(metric="m", at_least=0.5), pts([0.6, 0.1])) == 1


# -- diverged --------------------------------------------------------------------------
def test_diverged_needs_consecutive_crossings() -> None:
    rule = DivergedRule.model_validate({"metric": "e", "below": 0.01, "for": 3})
    assert diverged_step(rule, pts([0.5, 0.005, 0.004, 0.5, 0.003, 0.002, 0.001])) == 7
    assert diverged_step(rule, pts([0.005, 0.004])) is None  # only two so far
    above = DivergedRule(metric="kl", above=10.0)
    assert diverged_step(above, pts([1.0, 11.0])) == 2
    assert diverged_step(above, pts([1.0, INF])) == 2  # +inf is above any bound


def test_nan_crosses_no_bound_but_is_nonfinite() -> None:
    below = DivergedRule.model_validate({"metric": "e", "below": 0.01, "for": 2})
    assert diverged_step(below, pts([0.001, NAN, 0.001])) is None  # NaN breaks the run
    nonfinite = DivergedRule(metric="loss", nonfinite=True)
    assert diverged_step(nonfinite, pts([1.0, 2.0, NAN])) == 3
    assert diverged_step(nonfinite, pts([1.0, -INF])) == 2
    assert diverged_step(nonfinite, pts([1.0, 2.0])) is None


def test_diverged_min_steps_skips_early_logs() -> None:
    rule = DivergedRule.model_validate({"metric": "e", "below": 1.0, "for": 2, "min_steps": 3})
    assert diverged_step(rule, pts([0.1, 0.1, 0.1, 0.1])) == 4


# -- plateau ---------------------------------------------------------------------------
def test_plateau_fires_after_patience_on_a_settling_curve() -> None:
    points = saturating(60)
    rule = PlateauRule(metric="acc", min_steps=0, patience=20)
    step = plateau_step(rule, points)
    assert step is not None
    # The offline rule (first paper, App. B.3) agrees at that step, and it held at each
    # validation log of the last `patience` steps.
    held = [s for s, _ in points if s <= step and has_plateaued(
        [x for x, _ in points if x <= s], [v for x, v in points if x <= s])]
    assert step in held and all(s in held for s in range(step - 20, step + 1, 10))
    # A larger patience fires later; min_steps later still.
    later = plateau_step(PlateauRule(metric="acc", patience=60), points)
    assert later is not None and later == step + 40
    assert plateau_step(PlateauRule(metric="acc", min_steps=500, patience=20), points) == 500


def test_plateau_does_not_fire_on_a_curve_still_rising() -> None:
    linear = [(s, 0.001 * s) for s in range(0, 600, 10)]
    assert plateau_step(PlateauRule(metric="acc", patience=10), linear) is None
    assert plateau_step(PlateauRule(metric="acc"), linear[:5]) is None  # too few to fit


def test_plateau_patience_restarts_when_the_curve_moves_again() -> None:
    # Flat, then a second rise: the plateau held early, broke, and must hold anew.
    flat = [(s, 0.5) for s in range(0, 100, 10)]
    rise = [(s, 0.5 + 0.004 * (s - 100)) for s in range(100, 300, 10)]
    points = flat + rise + [(s, 1.3) for s in range(300, 900, 10)]
    early = plateau_step(PlateauRule(metric="acc", patience=30), flat)
    assert early is not None and early < 100
    step = plateau_step(PlateauRule(metric="acc", min_steps=110, patience=30), points)
    assert step is not None and step > 300


def test_plateau_ignores_nonfinite_values_in_the_fit() -> None:
    points = saturating(60)
    with_nan = [(s, NAN if i == 30 else v) for i, (s, v) in enumerate(points)]
    rule = PlateauRule(metric="acc", patience=20)
    assert plateau_step(rule, with_nan) is not None


def test_the_cache_changes_nothing_but_speed() -> None:
    rng = random.Random(7)
    seed = rng.randrange(10**6)
    print(f"noise seed {seed}")
    noise = np.random.default_rng(seed).normal(0, 0.02, 60)
    points = [(s, v + float(e)) for (s, v), e in zip(saturating(60), noise, strict=True)]
    rule = PlateauRule(metric="acc", min_steps=50, patience=30)
    cache = PlateauCache()
    # Judged log by log (as a live scheduler does) and at once (after a restart).
    live = [plateau_step(rule, points[:n], cache) for n in range(1, len(points) + 1)]
    fired = next((s for s in live if s is not None), None)
    assert fired == plateau_step(rule, points) == plateau_step(rule, points, cache)
    # A rule's step depends only on the history up to it: every later prefix agrees.
    assert all(s == fired for s in live if s is not None)


# -- all rules together ----------------------------------------------------------------
def _history(**series: list[tuple[int, float]]) -> MetricHistory:
    history = MetricHistory()
    for name, points in series.items():
        history.add([(s, {name: v}) for s, v in points])
    return history


def test_first_stop_takes_the_earliest_rule_and_prefers_diverged_on_a_tie() -> None:
    rules = StopRules.model_validate({
        "threshold": {"metric": "acc", "at_least": 0.5},
        "diverged": [{"metric": "loss", "nonfinite": True}],
    })
    history = _history(acc=pts([0.1, 0.6, 0.7]), loss=pts([1.0, 1.0, NAN]))
    stop = first_stop(rules, history)
    assert stop is not None and (stop.rule, stop.step, stop.outcome) == (
        "threshold", 2, "succeeded")
    tie = _history(acc=pts([0.1, 0.6]), loss=pts([1.0, NAN]))
    stop = first_stop(rules, tie)
    assert stop is not None and (stop.rule, stop.step, stop.outcome) == ("diverged", 2, "failed")
    assert stop.reason == "diverged at step 2 (loss non-finite; last nan)"
    assert first_stop(rules, _history(acc=pts([0.1]), loss=pts([1.0]))) is None
    assert first_stop(rules, MetricHistory()) is None  # nothing logged yet


def test_a_step_logged_again_keeps_its_latest_value() -> None:
    history = MetricHistory()
    only = frozenset({"acc"})
    assert history.add([(1, {"acc": 0.1, "other": 5.0}), (2, {"acc": 0.2})], only)
    assert not history.add([(3, {"other": 1.0})], only)
    history.add([(2, {"acc": 0.9})], only)  # a resumed launch redid step 2
    assert history.points("acc") == [(1, 0.1), (2, 0.9)] and "other" not in history.series


def test_a_pruned_trial_is_a_finished_result() -> None:
    request = pruned(40, "median pruner")
    assert (request.rule, request.step, request.outcome) == ("pruned", 40, "succeeded")
    assert request.reason == "pruned at step 40 (median pruner)"


@pytest.mark.parametrize("bad", [
    {"metric": "e"}, {"metric": "e", "below": 1.0, "above": 2.0},
    {"metric": "e", "nonfinite": False}, {"metric": "e", "below": 1.0, "for": 0},
])
def test_diverged_rules_need_exactly_one_condition(bad: dict[str, object]) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        DivergedRule.model_validate(bad)
