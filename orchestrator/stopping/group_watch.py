"""The scheduler's side of comparison groups (:mod:`.groups`): what it has read of each
running cell (:class:`Watch`), which members have met the rule
(:meth:`ComparisonGroups.judge`, each poll) and which groups are now to stop
(:meth:`ComparisonGroups.decisions`, each pass in which anything changed). A restart
loses nothing: firing steps are judged again from run folders, decisions read back from
the group's file or its members' stop requests."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.backends import Backend
from orchestrator.executors import JobHandle
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.runs.folder import read_json, write_json
from orchestrator.runs.layout import group_decision_file
from orchestrator.runs.stop_request import StopRequest, read_stop_request
from orchestrator.spec.stop_block import StopRules
from orchestrator.stopping.groups import MARGIN, Member, cadence, decide, group_key
from orchestrator.stopping.rules import MetricHistory, PlateauCache, first_stop


@dataclass
class Watch:
    """What the scheduler has read of one running cell (all of it re-readable)."""

    cursor: Any = None
    history: MetricHistory = field(default_factory=MetricHistory)
    cache: PlateauCache = field(default_factory=PlateauCache)
    rows_seen: int = 0
    request: StopRequest | None = None
    job: JobHandle | None = None
    job_ended: bool = False
    last_step: int = 0  # the last step the run logged (for a group's stop ahead of it)
    first_seen: tuple[float, int] | None = None  # (when, step) of its first logged rows
    last_seen: tuple[float, int] | None = None

    @property
    def steps_per_second(self) -> float:
        """How fast the run has been logging steps while watched (0 until known)."""
        if self.first_seen is None or self.last_seen is None:
            return 0.0
        elapsed = self.last_seen[0] - self.first_seen[0]
        return (self.last_seen[1] - self.first_seen[1]) / elapsed if elapsed > 0 else 0.0

    @property
    def short_of_group_stop(self) -> bool:
        """Its request is a group's, whose stop step the run has not logged yet."""
        return (self.request is not None and self.request.grouped
                and self.last_step < self.request.step)


def own_rules(rules: StopRules) -> StopRules:
    """The rules a group's member follows on its own: ``diverged``."""
    return rules.model_copy(update={"plateau": None, "threshold": None})


def fired_rule(rules: StopRules, history: MetricHistory,
               cache: PlateauCache | None = None) -> StopRequest | None:
    """The first of the group rules (plateau, threshold) to fire on ``history``."""
    return first_stop(rules.model_copy(update={"diverged": ()}), history, cache)


def every(rules: StopRules, history: MetricHistory) -> int:
    """The cadence of the group rules' metrics in ``history``."""
    return math.lcm(*(cadence([s for s, _ in history.points(m)]) for m in rules.group_metrics()))


def margin(steps_per_second: float, period: float) -> int:
    """Steps between the furthest member and the group's stop step: :data:`MARGIN` plus
    what the fastest member runs in two scheduler passes (a request reaches it in about
    one), so that no member is past the stop step when it reads it."""
    return MARGIN + math.ceil(max(0.0, steps_per_second) * 2 * max(0.0, period))


@dataclass
class ComparisonGroups:
    """Members' firing steps and the groups' decisions (see the module docstring)."""

    sweep: str
    rules: StopRules
    backend: Backend
    changed: bool = True  # the first pass judges every group (a restarted scheduler)
    fired: dict[str, int] = field(default_factory=dict)
    _rule_of: dict[str, str] = field(default_factory=dict)
    _decided: set[str] = field(default_factory=set)
    _read: dict[tuple[str, int], Member] = field(default_factory=dict)
    _period: float = 0.0
    keys: dict[str, str] = field(default_factory=dict)  # cell -> its group's key

    def judge(self, cell_id: str, history: MetricHistory,
              cache: PlateauCache) -> StopRequest | None:
        """A running member's new history: a ``diverged`` request (it stops at once), or
        ``None`` (its group rules only record where they fired)."""
        if (diverged := first_stop(own_rules(self.rules), history, cache)) is not None:
            return diverged
        hit = fired_rule(self.rules, history, cache)
        step = hit.step if hit is not None else None
        if step != self.fired.get(cell_id):
            self.changed = True
            if step is None:
                self.fired.pop(cell_id, None)
            else:
                self.fired[cell_id], self._rule_of[cell_id] = step, hit.rule  # type: ignore[union-attr]
        return None

    def decisions(self, registry: Registry, watches: Mapping[str, Watch],
                  period: float = 0.0) -> list[tuple[CellRecord, StopRequest]]:
        """The live members of every group now to stop, each with its request
        (``period``: seconds between passes, for the :func:`margin`)."""
        if not self.changed:
            return []
        self.changed = False
        self._period = max(self._period * 0.5, period)
        groups: dict[str, list[CellRecord]] = defaultdict(list)
        for cell in registry.cells(self.sweep):
            key = self.keys[cell.cell_id] = group_key(cell.axes, self.rules.together)
            groups[key].append(cell)
        out: list[tuple[CellRecord, StopRequest]] = []
        for key, cells in groups.items():
            if key in self._decided:
                continue
            live = [c for c in cells if _is_live(c)]
            folders = [Path(c.run_dir).parent for c in cells if c.run_dir]
            shared = group_decision_file(folders[0], key) if folders else None
            request = self._stored(cells, shared)
            if request is None:
                speed = max((watches[c.cell_id].steps_per_second for c in cells
                             if c.cell_id in watches), default=0.0)
                stop = decide([self._member(c, watches) for c in cells],
                              margin(speed, self._period))
                if stop is None:
                    continue
                last = max((c for c in cells if c.cell_id in stop.members),
                           key=lambda c: self.fired.get(c.cell_id, -1))
                request = stop.request(self._rule_of.get(last.cell_id, "plateau"))
                if shared is not None:  # first: one write reaches every member
                    shared.parent.mkdir(parents=True, exist_ok=True)
                    write_json(shared, request.as_json())
            self._decided.add(key)
            out += [(cell, request) for cell in live]
        return out

    def _stored(self, cells: Sequence[CellRecord], shared: Path | None) -> StopRequest | None:
        """A group decision made before a restart: the group's file, or one a member holds."""
        found = StopRequest.from_json(read_json(shared)) if shared is not None else None
        if found is not None and found.grouped:
            return found
        for cell in cells:
            if cell.run_dir:
                request = read_stop_request(Path(cell.run_dir))
                if request is not None and request.grouped:
                    return request
        return None

    def _member(self, cell: CellRecord, watches: Mapping[str, Watch]) -> Member:
        total = cell.total_steps
        if cell.state is CellState.SUCCEEDED:
            return Member(cell.cell_id, "out" if cell.stop_reason else "full", total=total)
        if not _is_live(cell):
            return Member(cell.cell_id, "out")
        watch = watches.get(cell.cell_id)
        if watch is not None:
            return Member(cell.cell_id, "live", self.fired.get(cell.cell_id), watch.last_step,
                          every(self.rules, watch.history), total)
        if cell.state is CellState.PENDING or cell.state is CellState.FAILED:
            return self._from_folder(cell)
        return Member(cell.cell_id, "live", total=total)  # launched, not yet polled

    def _from_folder(self, cell: CellRecord) -> Member:
        """A member waiting to (re)start: what its run folder logged so far."""
        key = (cell.cell_id, cell.attempts_count)
        if key not in self._read:
            history = MetricHistory()
            last = 0
            if cell.run_dir and Path(cell.run_dir).is_dir():
                rows = self.backend.read_metrics(Path(cell.run_dir), None).rows
                history.add(rows, self.rules.group_metrics())
                last = max([0, *(int(step) for step, _ in rows)])
            hit = fired_rule(self.rules, history)
            if hit is not None:
                self.fired[cell.cell_id], self._rule_of[cell.cell_id] = hit.step, hit.rule
            self._read[key] = Member(cell.cell_id, "live", hit.step if hit else None, last,
                                     every(self.rules, history), cell.total_steps)
        return self._read[key]


def _is_live(cell: CellRecord) -> bool:
    """Running, waiting to start, or failed with a retry left (not a final failure)."""
    return cell.state in (CellState.RUNNING, CellState.QUEUED, CellState.PENDING) or (
        cell.state is CellState.FAILED and not cell.stop_reason and cell.retries_left > 0)
