"""Comparison groups: cells whose results a table compares stop as one, at one step.

A sweep's ``stop.together`` names the axes its results compare (``[reward_budget]``);
cells whose other axis values are all equal form a comparison group (the ``+RB`` cell and
its baseline of the same seed). Stopped each on its own, the two runs of a delta would be
trained and evaluated at different steps, and the delta would measure that too. A group:

* each member's ``plateau`` / ``threshold`` rules are judged on its own history as without
  groups; the first step one fires is where the member *met* the rule (it trains on);
* a member that diverged, failed for good or was cancelled leaves the group;
* a member that ended at full length without meeting the rule makes the group run to
  full length;
* once every remaining member has met the rule, all stop at one step ``T``: the first log
  step of the rules' metric past the last firing step and at least a margin past the
  furthest member's progress (:data:`MARGIN`, widened live by what the fastest member runs
  in two scheduler passes: :func:`.group_watch.margin`), so no member is past ``T`` when it
  reads the request. The decision is written to a file every member reads
  (:func:`~orchestrator.runs.stop_request.read_group_request`), then to each member's own
  request, so a crash between the two loses nothing. If ``T`` would not come before the
  members' last step, the group runs to the end.

``diverged`` still stops a member at once, on its own. The functions are pure: the
scheduler (:mod:`.hook`) and the offline replay (:mod:`.replay`) feed them what they read."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

from orchestrator.runs.stop_request import StopRequest

MARGIN = 2
"""Steps between the furthest member's progress and the group's stop step: a member reads
the request at its next step boundary, which it reaches a step or two after it logged."""

Standing = Literal["live", "full", "out"]


def group_key(axes: Mapping[str, Any], together: Iterable[str]) -> str:
    """The comparison group of a cell with these axis values: its values of every axis
    not compared (``together``), as canonical JSON."""
    compared = set(together)
    return json.dumps({k: v for k, v in sorted(axes.items()) if k not in compared},
                      sort_keys=True, default=str)


def cadence(steps: Sequence[int]) -> int:
    """Steps between logs of a metric: the most common gap between consecutive logs (the smaller on
    a tie; a run's final log off the cadence does not change it); 1 without two logs."""
    gaps = Counter(b - a for a, b in pairwise(sorted(set(steps))))
    if not gaps:
        return 1
    top = max(gaps.values())
    return min(gap for gap, count in gaps.items() if count == top)


@dataclass(frozen=True)
class Member:
    """What the group rule needs of one cell: ``standing`` (``live``: running or waiting to
    start or retry; ``full``: ended at full length unstopped; ``out``: diverged, failed for
    good, cancelled), the step its own rule ``fired`` at (``None``: not yet), the last step
    it logged (``progress``), the rule's metric's cadence (``every``), its last step."""

    cell_id: str
    standing: Standing
    fired: int | None = None
    progress: int = 0
    every: int = 1
    total: int | None = None


@dataclass(frozen=True)
class GroupStop:
    """A group's decision: every live member stops at ``step``; ``met_by`` is the step by
    which all had met the rule."""

    step: int
    met_by: int
    members: tuple[str, ...]

    def request(self, rule: str) -> StopRequest:
        """The stop request every member gets (the same for all)."""
        others = len(self.members) - 1
        # "<rule> at step N (...)": status shortens a reason at its first " (".
        reason = (f"{rule} at step {self.step} (together with {others} other cell"
                  f"{'s' if others != 1 else ''} of its comparison group; all met it by step "
                  f"{self.met_by})")
        return StopRequest(rule, self.step, reason, "succeeded", met_by=self.met_by)


def decide(members: Sequence[Member], margin: int = MARGIN) -> GroupStop | None:
    """The group's stop, or ``None`` while it must train on (see the module docstring)."""
    live = [m for m in members if m.standing != "out"]
    if not live or any(m.standing == "full" or m.fired is None for m in live):
        return None
    met_by = max(m.fired or 0 for m in live)
    every = math.lcm(*(m.every for m in live))
    totals = [m.total for m in live if m.total]
    last = min(totals) if totals else None
    if last is not None and every >= last:
        every = 1
    base = max(met_by, *(m.progress for m in live)) + margin
    step = -(-base // every) * every
    if last is not None and step >= last:
        return None
    return GroupStop(step, met_by, tuple(m.cell_id for m in live))
