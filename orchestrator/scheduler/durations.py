"""How long a cell takes: the sweep's one duration model, for its launch order (:mod:`.order`) and
its GPU-hours cap (:mod:`orchestrator.stopping.budget`).

* A finished cell's **sample** (:func:`finished_sample`): a succeeded cell of one attempt
  (a retried cell's last one may have resumed halfway), its wall time scaled to its
  declared steps (:func:`declared_steps`) when a rule stopped it early.
* The sweep's **pace** (:class:`Pace`): the median seconds per declared step of its
  samples; a cell takes its declared steps at that pace. No sample, no pace.
* A running cell's **projection** (:func:`running_view`): its elapsed time (a lower
  bound) and, once a tenth of its only attempt is done, the time to its last progress
  report over the fraction done.

The cap prices a cell at the pace. The launch order (:class:`SiblingDurations`) moves the pace by a
cell's *siblings*, the cells doing the same work: settings equal but for those that do not change it
(:func:`work_free_settings`: a backend's, else ``seed``), in an ablation the same configuration
under other seeds. Their times (samples, projections) move it by the mean of log(time / pace),
weighted τ² / (τ² + σ²/n) for n siblings, σ² the variance of log times between siblings and τ² that
of configurations around the pace (empirical-Bayes shrinkage, measured on the finished cells): where
seeds take the same time the estimate is the siblings' (geometric mean) time; where they vary as
much as configurations do, the pace (siblings that say nothing are not believed). The longest a
running sibling has run raises it, weighted as one sibling. Before any cell finished the estimate is
the declared steps.

Each :meth:`SiblingDurations.observe` reads it all again from the registry, so a restarted scheduler
makes the same estimates; only what never changes for a cell id is cached (its work key, a hash of
its settings; a finished cell's sample).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from orchestrator.registry import CellRecord, CellState, Registry

DEFAULT_WORK_FREE = frozenset({"seed"})
# A running sibling's progress projects its length only once start-up (model load, warm
# start, compilation) weighs little against the steps done.
MIN_PROGRESS = 0.1
# What a configuration's siblings say: how many say how long, the mean of their
# log(time / pace), and the longest a running one has run so far (seconds).
Evidence = tuple[int, float, float]


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


def declared_steps(cell: CellRecord) -> int:
    """The cell's length in steps: as its backend declared it (its stored demand), else
    as its run reported it (0: unknown)."""
    return int((cell.demand or {}).get("steps") or 0) or (cell.total_steps or 0)


@dataclass(frozen=True)
class Finished:
    """A finished cell as a sample (module docstring): its work, when it ended, its
    seconds and declared steps (0: unknown)."""

    key: bytes
    ended: datetime
    seconds: float
    steps: int


def finished_sample(cell: CellRecord, key: bytes = b"") -> Finished | None:
    """``cell`` as a duration sample (module docstring), or ``None``: not succeeded,
    retried or without both timestamps. ``key``: its work key, where siblings matter."""
    if (cell.state is not CellState.SUCCEEDED or cell.attempts_count != 1
            or cell.started_at is None or cell.finished_at is None):
        return None
    seconds = (cell.finished_at - cell.started_at).total_seconds()
    if seconds <= 0:
        return None
    steps, done = declared_steps(cell), cell.progress_step or 0
    if 0 < done < steps:  # stopped early: how long the declared steps take at its pace
        seconds *= steps / done
    return Finished(key, cell.finished_at, seconds, steps)


@dataclass(frozen=True)
class Pace:
    """The sweep's pace (module docstring): median seconds per declared step of its
    samples (``None``: no sample's steps are known) and the median sample's seconds."""

    per_step: float | None
    median: float

    @classmethod
    def of(cls, samples: Iterable[Finished | None]) -> Pace | None:
        """The pace of ``samples`` (``None`` entries skipped); ``None`` without any."""
        found = [s for s in samples if s is not None]
        rates = [s.seconds / s.steps for s in found if s.steps > 0]
        return cls(statistics.median(rates) if rates else None,
                   statistics.median(s.seconds for s in found)) if found else None

    def seconds(self, steps: int) -> float:
        """How long a cell of ``steps`` declared steps takes (0: unknown)."""
        return steps * self.per_step if steps > 0 and self.per_step is not None else self.median


def running_view(cell: CellRecord, now: datetime) -> tuple[float, float | None]:
    """A running cell's elapsed seconds (a lower bound on its length) and, when it has
    done at least :data:`MIN_PROGRESS` of its only attempt, its projected length."""
    if cell.started_at is None:
        return 0.0, None
    elapsed = max(0.0, (now - cell.started_at).total_seconds())
    total, done, when = declared_steps(cell), cell.progress_step or 0, cell.progress_updated_at
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
    clock: Callable[[], datetime] = field(default=partial(datetime.now, UTC))
    sample_limit: int | None = None
    #: Remake the estimates at most this often (on ``clock``): cells run for minutes to
    #: days, so a second-old estimate orders them as well, and a pass launching short
    #: cells back to back skips the registry reads (a third of a trivial cell's cost).
    refresh: timedelta = timedelta(seconds=1)
    _observed_at: datetime | None = field(default=None, init=False, repr=False)
    _keys: dict[str, bytes] = field(default_factory=dict, init=False, repr=False)
    # finished cell id -> its sample (None: not one, e.g. retried)
    _finished: dict[str, Finished | None] = field(default_factory=dict, init=False, repr=False)
    _succeeded_seen: int = field(default=-1, init=False, repr=False)
    _pace: Pace | None = field(default=None, init=False, repr=False)
    # work key -> log(time / pace) of each finished sibling
    _done: dict[bytes, list[float]] = field(default_factory=dict, init=False, repr=False)
    # Variance of log(time / pace) between siblings, and of configurations' means around
    # the pace (``None``: not measurable yet).
    _within: float | None = field(default=None, init=False, repr=False)
    _between: float | None = field(default=None, init=False, repr=False)
    # work key -> what its siblings say: of finished siblings only, and with running ones
    _settled: dict[bytes, Evidence] = field(default_factory=dict, init=False, repr=False)
    _known: dict[bytes, Evidence] = field(default_factory=dict, init=False, repr=False)

    def learn(self, cell: CellRecord) -> bytes:
        """The cell's work key (computed once per cell id: its settings never change)."""
        key = self._keys.get(cell.cell_id)
        if key is None:
            key = self._keys[cell.cell_id] = work_key(cell.settings, self.free)
        return key

    def observe(self, registry: Registry, sweep: str) -> None:
        """Remake the estimates from what the registry holds now (module docstring), unless
        they were made less than ``refresh`` ago."""
        now, last = self.clock(), self._observed_at
        if last is not None and timedelta(0) <= now - last < self.refresh:
            return
        self._observed_at = now
        succeeded = registry.counts(sweep)[CellState.SUCCEEDED]
        if succeeded != self._succeeded_seen:  # finished cells are read only when new
            self._succeeded_seen = succeeded
            ids = {cell_id for cell_id, _ in registry.cell_keys(sweep, [CellState.SUCCEEDED])}
            self._finished = {i: s for i, s in self._finished.items() if i in ids}
            for cell in registry.cells_by_id(sweep, ids.difference(self._finished)):
                self._finished[cell.cell_id] = finished_sample(cell, self.learn(cell))
            self.finished([s for s in self._finished.values() if s is not None])
        self.running(registry.cells(sweep, [CellState.RUNNING]))

    def finished(self, samples: Iterable[Finished]) -> None:
        """Take these as the sweep's finished cells (what :meth:`observe` read; a test
        gives them directly); :meth:`running` then remakes the estimates."""
        per_key: dict[bytes, list[Finished]] = {}
        for sample in sorted(samples, key=lambda s: s.ended):
            mine = per_key.setdefault(sample.key, [])
            if self.sample_limit is None or len(mine) < self.sample_limit:
                mine.append(sample)
        pace = self._pace = Pace.of(s for mine in per_key.values() for s in mine)
        self._done = {k: [math.log(s.seconds / pace.seconds(s.steps)) for s in mine]
                      for k, mine in per_key.items() if pace is not None}
        self._within, self._between = spread(list(self._done.values()))
        self._settled = {k: (len(logs), statistics.fmean(logs), 0.0)
                         for k, logs in self._done.items()}

    def running(self, cells: Iterable[CellRecord]) -> None:
        """Take these as the sweep's running cells and remake every estimate."""
        floors: dict[bytes, float] = {}
        # Projections in the same terms as the finished siblings', once there is a pace.
        projected: dict[bytes, list[float]] = {}
        now, pace = self.clock(), self._pace
        for cell in cells:
            key = self.learn(cell)
            elapsed, length = running_view(cell, now)
            floors[key] = max(floors.get(key, 0.0), elapsed)
            if length is not None and pace is not None:
                projected.setdefault(key, []).append(
                    math.log(length / pace.seconds(declared_steps(cell))))
        known = dict(self._settled)  # only configurations with a running cell change
        for key, floor in floors.items():
            logs = self._done.get(key, []) + projected.get(key, [])
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
        """How long the cell is expected to take: seconds once some cell of the sweep
        has finished, else its declared ``steps`` (module docstring)."""
        if self._pace is None:
            return float(steps)
        pace = self._pace.seconds(steps)
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


def spread(groups: list[list[float]]) -> tuple[float | None, float | None]:
    """(σ², τ²) of values in groups: the pooled variance within groups (``None`` without a group of
    two), and the variance of the groups' true means, by the method of moments (variance of the
    group means less what σ² alone gives them; ``None`` with fewer than two groups or no σ²)."""
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
