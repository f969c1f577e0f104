"""Stopping rules replayed offline on a finished full-length sweep: where each cell would
have stopped, and its numbers there (what ``kappa stop-check`` reports).

Rules are judged exactly as live (:mod:`.rules`, :mod:`.groups`), so the replay's stop
steps are the live ones up to latency: live, a cell stops a step or two after its rule
fires, the replay takes the firing step; a group's ``T`` is computed as if every member
were at the last firing step, with the fixed :data:`~.groups.MARGIN` (live, the margin is
wider, so ``T`` can be one log later when the metric's cadence is not larger than it).

A cell's numbers at its stop step are each metric's last value logged at or before it
(what a run stopped there reports, for a deterministic trainer); metrics computed only at
the end of a run (held-out benchmarks) are left out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.spec.stop_block import StopRules
from orchestrator.stopping.group_watch import every, fired_rule, own_rules
from orchestrator.stopping.groups import Member, decide, group_key
from orchestrator.stopping.rules import MetricHistory, first_stop


@dataclass(frozen=True)
class FinishedCell:
    """A cell of the finished sweep: its axes, whether it succeeded, its full history."""

    cell_id: str
    axes: Mapping[str, Any]
    succeeded: bool
    history: MetricHistory
    total_steps: int | None = None


@dataclass(frozen=True)
class Replayed:
    """Where the rules would have ended one cell: ``step`` (``None``: at full length),
    ``reason``, ``failed`` (a ``diverged`` rule), its ``values`` there (the metrics logged
    at or before ``step``; every final value when it ran to the end)."""

    cell_id: str
    step: int | None
    reason: str | None
    failed: bool
    values: dict[str, float]
    full_step: int


def values_at(history: MetricHistory, step: int | None) -> dict[str, float]:
    """The last value of every metric logged at or before ``step`` (``None``: the end)."""
    out: dict[str, float] = {}
    for name in history.series:
        if points := [(s, v) for s, v in history.points(name) if step is None or s <= step]:
            out[name] = points[-1][1]
    return out


def _last_step(history: MetricHistory) -> int:
    return max((max(series) for series in history.series.values() if series), default=0)


def replay(cells: Sequence[FinishedCell], rules: StopRules) -> list[Replayed]:
    """The rules' stop of every cell (see the module docstring)."""
    stops: dict[str, tuple[int, str, bool]] = {}  # cell -> (step, reason, failed)
    alone = own_rules(rules) if rules.grouped else rules
    for cell in cells:
        if cell.succeeded and (request := first_stop(alone, cell.history)) is not None:
            stops[cell.cell_id] = (request.step, request.reason, request.outcome == "failed")
    if rules.grouped:
        groups: dict[str, list[FinishedCell]] = defaultdict(list)
        for cell in cells:
            groups[group_key(cell.axes, rules.together)].append(cell)
        for members in groups.values():
            stops.update(_group_stops(members, rules, stops))
    out = []
    for cell in cells:
        step, reason, failed = stops.get(cell.cell_id, (None, None, False))
        out.append(Replayed(cell.cell_id, step, reason, failed,
                            {} if failed else values_at(cell.history, step),
                            _last_step(cell.history)))
    return out


def _group_stops(members: Sequence[FinishedCell], rules: StopRules,
                 alone: Mapping[str, tuple[int, str, bool]]) -> dict[str, tuple[int, str, bool]]:
    """A group's stop, with members as if side by side (each at its firing step)."""
    views: list[Member] = []
    for cell in members:
        if not cell.succeeded or cell.cell_id in alone:  # failed, or diverged on its own
            views.append(Member(cell.cell_id, "out"))
            continue
        hit = fired_rule(rules, cell.history)
        fired = hit.step if hit is not None else None
        views.append(Member(cell.cell_id, "live", fired, fired or 0,
                            every(rules, cell.history), cell.total_steps))
    stop = decide(views)
    if stop is None:
        return {}
    hits = [fired_rule(rules, c.history) for c in members if c.cell_id in stop.members]
    rule = max((h for h in hits if h is not None), key=lambda h: h.step).rule
    reason = stop.request(rule).reason
    return {cell_id: (stop.step, reason, False) for cell_id in stop.members}
