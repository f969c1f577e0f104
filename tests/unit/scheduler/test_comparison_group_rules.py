"""Comparison groups as pure functions: who belongs together, when a group stops, and
the offline replay of a finished sweep with known curves."""

from __future__ import annotations

import math
import random

import pytest

from orchestrator.analysis.stop_check import check
from orchestrator.runs.stop_request import StopRequest
from orchestrator.spec.stop_block import StopRules
from orchestrator.stopping.groups import MARGIN, GroupStop, Member, cadence, decide, group_key
from orchestrator.stopping.replay import FinishedCell, replay, values_at
from orchestrator.stopping.rules import MetricHistory


def test_cells_differing_only_in_the_compared_axes_share_a_group() -> None:
    a = group_key({"baseline": "grpo", "reward_budget": False, "seed": 0}, ["reward_budget"])
    b = group_key({"seed": 0, "reward_budget": True, "baseline": "grpo"}, ["reward_budget"])
    c = group_key({"baseline": "grpo", "reward_budget": True, "seed": 1}, ["reward_budget"])
    assert a == b != c
    assert group_key({"x": 1}, []) != group_key({"x": 2}, [])


def test_cadence_is_the_logging_interval() -> None:
    assert cadence([0, 10, 20, 30, 37]) == 10  # a last log off the cadence is ignored
    assert cadence([1, 2, 3]) == 1
    assert cadence([0, 3]) == 3
    assert cadence([0, 3, 5]) == 2  # a tie: the smaller
    assert cadence([7]) == cadence([]) == 1


def test_a_group_waits_until_every_member_has_met_the_rule() -> None:
    early = Member("a", "live", fired=40, progress=57, every=10, total=300)
    late = Member("b", "live", fired=None, progress=55, every=10, total=300)
    assert decide([early, late]) is None
    late = Member("b", "live", fired=90, progress=91, every=10, total=300)
    stop = decide([early, late])
    # Past the later firing step and the furthest progress by MARGIN, on the cadence.
    assert stop == GroupStop(100, 90, ("a", "b"))
    assert decide([early, Member("b", "live", 90, 98, 10, 300)]) == GroupStop(100, 90, ("a", "b"))
    assert decide([early, Member("b", "live", 90, 99, 10, 300)]) == GroupStop(110, 90, ("a", "b"))


def test_members_that_left_do_not_hold_the_others_hostage() -> None:
    live = Member("a", "live", fired=40, progress=41, every=1, total=300)
    out = Member("b", "out")
    assert decide([live, out]) == GroupStop(41 + MARGIN, 40, ("a",))
    assert decide([out]) is None


def test_a_member_at_full_length_makes_the_group_run_to_the_end() -> None:
    full = Member("a", "full", total=300)
    fired = Member("b", "live", fired=40, progress=41, every=1, total=300)
    assert decide([full, fired]) is None


def test_no_stop_at_or_past_the_last_step() -> None:
    assert decide([Member("a", "live", 295, 297, 10, 300)]) is None


def test_the_request_is_the_same_for_every_member_and_round_trips() -> None:
    request = GroupStop(100, 90, ("a", "b", "c")).request("plateau")
    assert request.step == 100 and request.met_by == 90 and request.grouped
    assert "together with 2 other cells" in request.reason
    again = StopRequest.from_json(request.as_json())
    assert again == request
    assert not StopRequest("plateau", 5, "r").grouped


@pytest.mark.parametrize("seed", range(20))
def test_decide_is_never_before_any_firing_or_progress(seed: int) -> None:
    rng = random.Random(seed)
    print(f"seed {seed}")
    members = []
    for n in range(rng.randint(1, 5)):
        fired = rng.randint(1, 200)
        members.append(Member(str(n), "live", fired, fired + rng.randint(0, 5),
                              rng.choice([1, 5, 10]), 1000))
    stop = decide(members)
    assert stop is not None
    assert all(stop.step >= m.progress + MARGIN and stop.step >= (m.fired or 0)
               for m in members)
    assert all(stop.step % m.every == 0 for m in members)


def _curve(rise_until: int, top: float, steps: int = 300, every: int = 10) -> MetricHistory:
    """A validation curve rising linearly to ``top`` at ``rise_until``, then flat."""
    history = MetricHistory()
    rows = [(s, {"val": top * min(1.0, s / rise_until), "loss": 1.0 / (1 + s)})
            for s in range(0, steps + 1, every)]
    history.add(rows)
    return history


def _sweep(treat_rise: int) -> list[FinishedCell]:
    cells = []
    for seed in range(3):
        for rb, rise, top in ((False, 60, 0.60 + 0.01 * seed), (True, treat_rise, 0.80)):
            cells.append(FinishedCell(f"s{seed}-{rb}", {"rb": rb, "seed": seed}, True,
                                      _curve(rise, top), 300))
    return cells


def test_replay_on_known_curves_stops_each_group_after_its_slower_member() -> None:
    rules = StopRules.model_validate({"threshold": {"metric": "val", "at_least": 0.55},
                                      "together": ["rb"]})
    cells = _sweep(treat_rise=150)
    out = {r.cell_id: r for r in replay(cells, rules)}
    # rb=False crosses 0.55 by step 60 at the latest; rb=True at 0.55/0.80*150 = 103.1 ->
    # its first log at or past it: step 110. The group stops at 120 (110 + MARGIN, on the
    # cadence of 10), both members there, with the values logged at 120.
    for seed in range(3):
        a, b = out[f"s{seed}-False"], out[f"s{seed}-True"]
        assert a.step == b.step == 120 and a.full_step == 300
        assert a.values["val"] == pytest.approx(0.60 + 0.01 * seed)
        assert b.values["val"] == pytest.approx(0.80 * 120 / 150)
        assert "together with 1 other cell" in (a.reason or "")

    alone = replay(cells, rules.model_copy(update={"together": ()}))
    steps = {r.cell_id: r.step for r in alone}
    assert steps["s0-False"] == 60 and steps["s0-True"] == 110  # unequal without groups


def test_stop_check_counts_what_the_rule_changed() -> None:
    rules = StopRules.model_validate({"threshold": {"metric": "val", "at_least": 0.55},
                                      "together": ["rb"]})
    cells = _sweep(treat_rise=150)
    hours = {c.cell_id: 1.0 for c in cells}
    result = check(cells, replay(cells, rules), hours, "val", "rb", "false")
    assert result.steps_full == 1800 and result.steps_stopped == 6 * 120
    assert result.hours_stopped == pytest.approx(6 * 120 / 300)
    deltas = [c for c in result.comparisons if c.kind == "delta"]
    (delta,) = deltas
    assert delta.steps == (120,) and delta.n == 3
    assert delta.full == pytest.approx(0.80 - 0.61)
    # Its interval is the paired t-interval of the seeds' differences 0.20, 0.19, 0.18 (a
    # bootstrap over three pairs would give their range, [0.18, 0.20]).
    from scipy.stats import t

    half = t.ppf(0.975, 2) * 0.01 / math.sqrt(3)
    assert (delta.low, delta.high) == pytest.approx((0.19 - half, 0.19 + half))
    assert delta.stopped == pytest.approx(0.80 * 120 / 150 - 0.61)
    assert not delta.sign_changed
    assert result.count("mean")[1] == 2  # two means with an interval

    # A treatment that catches up late: at the early stop the delta has the other sign.
    late = _sweep(treat_rise=290)
    rules_late = StopRules.model_validate({"threshold": {"metric": "val", "at_least": 0.3},
                                           "together": ["rb"]})
    flipped = check(late, replay(late, rules_late), {}, "val", "rb", "false")
    (delta,) = [c for c in flipped.comparisons if c.kind == "delta"]
    assert delta.sign_changed and delta.within is False


def test_values_at_takes_the_last_log_at_or_before_the_step() -> None:
    history = MetricHistory()
    history.add([(0, {"a": 1.0}), (10, {"a": 2.0, "b": 5.0}), (20, {"a": math.nan})])
    assert values_at(history, 15) == {"a": 2.0, "b": 5.0}
    assert values_at(history, 5) == {"a": 1.0}
    assert math.isnan(values_at(history, None)["a"])
