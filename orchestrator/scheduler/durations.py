"""How long a waiting cell will take, learned from its siblings.

A cell's *siblings* are the cells of its sweep that do the same work: their settings are
equal but for those that do not change the work (:func:`work_free_settings`: a backend's
``work_free_settings``, else ``seed``). In an ablation most cells have siblings, the same
configuration under other seeds, and the first of them to finish says how long the rest
will take; one still running says at least how long (its elapsed time) and, once it is a
tenth of the way through, about how long (elapsed time over the fraction done).

The estimate of a cell (:meth:`SiblingDurations.expected`, in seconds) starts from the
sweep's *pace*: its declared steps at the median seconds per step of the finished cells
(the median finished cell's time when its steps are unknown). Its siblings' times (finished
ones' durations, running ones' projections) move it by the mean of log(time / pace),
weighted by how much siblings agree: τ² / (τ² + σ²/n) for n siblings, σ² the variance of
log times between siblings and τ² that of configurations around the pace (empirical-Bayes
shrinkage, measured on the sweep's finished cells). Where seeds take the same time the
weight is 1 and the estimate is the siblings' (geometric mean) time; where they vary as
much as configurations do, it is 0 and the estimate is the pace: siblings that say nothing
are not believed. The longest a running sibling has run raises the estimate, weighted as
one sibling. Until some cell of the sweep has finished there is no time to go by and the
estimate is the declared steps, as the order had before.

Everything comes from what the registry holds, read again by each :meth:`observe`: a
finished cell's duration (``finished_at - started_at`` of its only attempt; a retried
cell's last attempt may have resumed halfway, so it is not a sample) and steps, a running
cell's start and progress. A restarted scheduler therefore makes the same estimates; what
is cached is only what never changes for a cell id (its work key, which is a hash of its
settings, and a finished cell's sample while it stays finished).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from orchestrator.registry import CellRecord, CellState, Registry

DEFAULT_WORK_FREE = frozenset({"seed"})
# A running sibling's progress projects its length only once start-up (model load, warm
# start, compilation) weighs little against the steps done.
MIN_PROGRESS = 0.1


def work_free_settings(backend: Any) -> frozenset[str]:
    """Settings whose value does not change a cell's work (its length): the backend's
    ``work_free_settings`` when it declares them, else ``seed``."""
    free = getattr(backend, "work_free_settings", None)
    return DEFAULT_WORK_FREE if free is None else frozenset(free)


def work_key(settings: Mapping[str, Any], free: frozenset[str]) -> bytes:
    """What siblings share: a digest of ``settings`` without the ``free`` ones (a digest,
    so 100,000 cells of verl settings keep a few MB, not their settings, in memory)."""
    text = json.dumps({k: v for k, v in settings.items() if k not in free}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Finished:
    """A finished cell as a sample: its work, when it ended, its time scaled to its
    declared steps (a cell a rule stopped early took less than its siblings may), and
    its declared steps (0: unknown)."""

    key: bytes
    ended: datetime
    seconds: float
    steps: int


def finished_sample(cell: CellRecord, key: bytes) -> Finished | None:
    """``cell`` as a duration sample, or ``None``: not succeeded, retried (its last
    attempt may have resumed from a checkpoint) or without both timestamps."""
    if (cell.state is not CellState.SUCCEEDED or cell.attempts_count != 1
            or cell.started_at is None or cell.finished_at is None):
        return None
    seconds = (cell.finished_at - cell.started_at).total_seconds()
    if seconds <= 0:
        return None
    steps = int((cell.demand or {}).get("steps") or 0) or (cell.total_steps or 0)
    done = cell.progress_step or 0
    if 0 < done < steps:  # stopped early: how long the declared steps take at its pace
        seconds *= steps / done
    return Finished(key, cell.finished_at, seconds, steps)


def running_view(cell: CellRecord, now: datetime) -> tuple[float, float | None]:
    """A running cell's elapsed seconds (a lower bound on its length) and, when it has
    done at least :data:`MIN_PROGRESS` of its only attempt, its projected length."""
    if cell.started_at is None:
        return 0.0, None
    elapsed = max(0.0, (now - cell.started_at).total_seconds())
    total = cell.total_steps or int((cell.demand or {}).get("steps") or 0)
    done, when = cell.progress_step or 0, cell.progress_updated_at
    if cell.attempts_count != 1 or not total or when is None or done < MIN_PROGRESS * total:
        return elapsed, None
    ran = (when - cell.started_at).total_seconds()
    return elapsed, (max(elapsed, ran * total / done) if ran > 0 else None)


@dataclass
class SiblingDurations:
    """A sweep's duration estimates (module docstring). ``free``: the settings that do not
    change the work; ``clock``: now, on the registry's clock; ``sample_limit``: use only
    the first N finished siblings of each configuration (to measure how many it needs)."""

    free: frozenset[str] = DEFAULT_WORK_FREE
    clock: Callable[[], datetime] = _utcnow
    sample_limit: int | None = None
    _keys: dict[str, bytes] = field(default_factory=dict, init=False, repr=False)
    # finished cell id -> its sample (None: not one, e.g. retried)
    _finished: dict[str, Finished | None] = field(default_factory=dict, init=False, repr=False)
    _succeeded_seen: int = field(default=-1, init=False, repr=False)
    _rate: float | None = field(default=None, init=False, repr=False)  # s per declared step
    _median: float | None = field(default=None, init=False, repr=False)
    # work key -> log(time / pace) of each finished sibling
    _done: dict[bytes, list[float]] = field(default_factory=dict, init=False, repr=False)
    # Variance of log(time / pace) between siblings, and of configurations' means around
    # the pace (``None``: not measurable yet).
    _within: float | None = field(default=None, init=False, repr=False)
    _between: float | None = field(default=None, init=False, repr=False)
    # work key -> (siblings that say how long, the mean of their log(time / pace), the
    # longest a running one has run so far): of finished siblings only, and with running
    _settled: dict[bytes, tuple[int, float, float]] = field(default_factory=dict, init=False,
                                                            repr=False)
    _known: dict[bytes, tuple[int, float, float]] = field(default_factory=dict, init=False,
                                                          repr=False)

    def learn(self, cell: CellRecord) -> bytes:
        """The cell's work key (computed once per cell id: its settings never change)."""
        key = self._keys.get(cell.cell_id)
        if key is None:
            key = self._keys[cell.cell_id] = work_key(cell.settings, self.free)
        return key

    @property
    def timed(self) -> bool:
        """Whether some cell of the sweep has finished: estimates are then in seconds."""
        return self._median is not None

    def observe(self, registry: Registry, sweep: str) -> None:
        """Remake the estimates from what the registry holds now (module docstring)."""
        succeeded = registry.counts(sweep)[CellState.SUCCEEDED]
        if succeeded != self._succeeded_seen:  # finished cells are read only when new
            self._succeeded_seen = succeeded
            ids = {cell_id for cell_id, _ in registry.cell_keys(sweep, [CellState.SUCCEEDED])}
            self._finished = {i: s for i, s in self._finished.items() if i in ids}
            for cell in registry.cells_by_id(sweep, ids.difference(self._finished)):
                self._finished[cell.cell_id] = finished_sample(cell, self.learn(cell))
            self.finished([s for s in self._finished.values() if s is not None])
        self.running(registry.cells(sweep, [CellState.RUNNING]))

    def pace(self, steps: int) -> float:
        """What a cell of ``steps`` declared steps takes at the sweep's median pace (the
        median finished cell when its steps are unknown); once :attr:`timed`."""
        assert self._median is not None
        return steps * self._rate if steps > 0 and self._rate is not None else self._median

    def finished(self, samples: Iterable[Finished]) -> None:
        """Take these as the sweep's finished cells (what :meth:`observe` read; a test
        gives them directly); :meth:`running` then remakes the estimates."""
        per_key: dict[bytes, list[Finished]] = {}
        for sample in sorted(samples, key=lambda s: s.ended):
            mine = per_key.setdefault(sample.key, [])
            if self.sample_limit is None or len(mine) < self.sample_limit:
                mine.append(sample)
        used = [s for mine in per_key.values() for s in mine]
        self._median = statistics.median(s.seconds for s in used) if used else None
        rates = [s.seconds / s.steps for s in used if s.steps > 0]
        self._rate = statistics.median(rates) if rates else None
        self._done = {k: [math.log(s.seconds / self.pace(s.steps)) for s in mine]
                      for k, mine in per_key.items()}
        self._within, self._between = spread(list(self._done.values()))
        self._settled = {k: (len(logs), statistics.fmean(logs), 0.0)
                         for k, logs in self._done.items()}

    def running(self, cells: Iterable[CellRecord]) -> None:
        """Take these as the sweep's running cells and remake every estimate."""
        floors: dict[bytes, float] = {}
        projected: dict[bytes, list[float]] = {}
        now = self.clock()
        steps: dict[bytes, int] = {}
        for cell in cells:
            key = self.learn(cell)
            elapsed, length = running_view(cell, now)
            floors[key] = max(floors.get(key, 0.0), elapsed)
            if length is not None:
                projected.setdefault(key, []).append(length)
                steps[key] = int((cell.demand or {}).get("steps") or 0)
        known = dict(self._settled)  # only configurations with a running cell change
        for key, floor in floors.items():
            logs = list(self._done.get(key, []))
            if self._median is not None:  # projections in the same terms, once there is a pace
                logs += [math.log(x / self.pace(steps[key])) for x in projected.get(key, [])]
            known[key] = (len(logs), statistics.fmean(logs) if logs else 0.0, floor)
        self._known = known

    def weight(self, siblings: int) -> float:
        """How much ``siblings`` siblings' own times count against the sweep's pace: the
        share of the spread of times that lies between configurations, τ² / (τ² + σ²/n)
        (the empirical-Bayes shrinkage of a random-effects model). 1 until the spread is
        measurable: siblings are taken at their word until theirs is seen to vary."""
        if siblings <= 0:
            return 0.0
        if self._within is None or self._between is None or self._within == 0:
            return 1.0
        return self._between / (self._between + self._within / siblings)

    def expected(self, cell_id: str, steps: int) -> float:
        """How long the cell is expected to take: seconds once the sweep is :attr:`timed`,
        else its declared ``steps`` (module docstring)."""
        if self._median is None:
            return float(steps)
        pace = self.pace(steps)
        key = self._keys.get(cell_id)
        count, mean, floor = self._known.get(key, (0, 0.0, 0.0)) if key else (0, 0.0, 0.0)
        estimate = pace * math.exp(self.weight(count) * mean)
        if floor > pace:  # a running sibling's time, by what one sibling's time weighs
            estimate = max(estimate, pace * (floor / pace) ** self.weight(1))
        return estimate

    def probes(self, ids: Iterable[str]) -> set[str]:
        """Of ``ids`` (in registry order), the first cell of each configuration none of
        whose cells has started (running or finished, as of the last :meth:`observe`);
        a cell never learnt counts as a configuration of its own."""
        found: set[str] = set()
        seen: set[bytes] = set()
        for cell_id in ids:
            key = self._keys.get(cell_id)
            if key is None:
                found.add(cell_id)
            elif key not in self._known and key not in seen:
                seen.add(key)
                found.add(cell_id)
        return found

    def siblings_finished(self, cell_id: str) -> int:
        """How many of the cell's finished siblings the estimate uses."""
        key = self._keys.get(cell_id)
        return 0 if key is None else len(self._done.get(key, []))


def spread(groups: list[list[float]]) -> tuple[float | None, float | None]:
    """(σ², τ²) of values in groups: the pooled variance within groups (``None`` without
    a group of two), and the variance of the groups' true means, by the method of moments
    (variance of the group means less what σ² alone gives them; ``None`` with fewer than
    two groups or no σ²)."""
    pairs = [(len(g), statistics.fmean(g)) for g in groups if g]
    free = sum(n - 1 for n, _ in pairs)
    if not free:
        return None, None
    within = sum((x - m) ** 2 for g, (_, m) in zip((g for g in groups if g), pairs, strict=True)
                 for x in g) / free
    if len(pairs) < 2:
        return within, None
    means = [m for _, m in pairs]
    noise = within * statistics.fmean(1 / n for n, _ in pairs)
    return within, max(0.0, statistics.pvariance(means) - noise)
