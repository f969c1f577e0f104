"""What a sweep's pending cells ask for: the order they launch in, which fit now, which never can.

A sweep's makespan is decided at its end (a long cell started late keeps the cluster busy while most
GPUs idle), so kappa launches the **longest expected cells first** (the sweep's duration model,
:mod:`.durations`: seconds once some cell finished, declared steps before) and **backfills** smaller
cells that fit the free GPUs behind one that does not. First comes a *probe* of each configuration
none of whose cells has started (its first in registry order): until one runs nothing says how long
it takes, and a long one found late ends the sweep late (on the simulated cluster, ranking probes
only among equal estimates left a 10.5 h configuration unprobed until hour 55 of 67). Ties keep
registry order; :meth:`LaunchOrder.observe` remakes the estimates from the registry, so a restarted
scheduler orders as the one before it did.

GPU demand is deliberately not a sort key: on simulated clusters (``bench/cluster_makespan.py``)
largest-GPU-first did worse than registry order whenever lengths were not known, and no better when
they were. ``LaunchOrder(longest_first=False, backfill=False)`` is strict FIFO, the benchmark's
baseline; ``siblings=False`` orders by declared steps only.

:func:`job_resources` is the one place a cell's :class:`JobResources` are made (from its stored
demand and the spec's ``resources``). A cell asking for more than the executor can *ever* give would
wait forever, silently ``pending``, so ``submit``, ``resume`` and ``canary`` ask
:meth:`Executor.fits` about every distinct request first (:func:`check_fit`), before anything is
written or launched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from orchestrator.backends.base import Demand
from orchestrator.errors import Problem, UserInputError
from orchestrator.executors.base import Executor, JobResources
from orchestrator.registry import CellRecord, Registry
from orchestrator.scheduler.durations import SiblingDurations, work_free_settings
from orchestrator.spec.model import Resources

# A cell whose demand was never judged (its settings no longer validated when the
# registry was upgraded): it needs nothing, so it is never held back for GPUs; its
# launch fails it (a failed attempt with the reason).
_INVALID = Demand(gpus=0, steps=0)


def stored_demand(cell: CellRecord) -> Demand | None:
    """The cell's demand as stored when it was validated; ``None`` if it never was."""
    return None if cell.demand is None else Demand.of(cell.demand)


CellKey = tuple[str, int]
"""A waiting cell as a pass reads it: ``(cell id, index)`` (``Registry.cell_keys``)."""


@dataclass
class LaunchOrder:
    """Which pending cells to launch, in what order (see the module docstring), by cell
    id; a cell's stored demand is read once, the first time the order meets it (its
    settings never change: the cell id is their hash)."""

    longest_first: bool = True
    backfill: bool = True
    siblings: bool = True  # estimate lengths from siblings (else declared steps only)
    durations: SiblingDurations = field(default_factory=SiblingDurations)
    _demands: dict[str, Demand] = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def for_backend(cls, backend: object) -> LaunchOrder:
        """kappa's order for a sweep of ``backend`` (whose settings that do not change the
        work, :func:`~.durations.work_free_settings`, tell siblings apart)."""
        return cls(durations=SiblingDurations(work_free_settings(backend)))

    def observe(self, registry: Registry, sweep: str) -> None:
        """Remake the length estimates from what the registry holds now (a pass calls it
        before :meth:`sort`)."""
        if self.longest_first and self.siblings:
            self.durations.observe(registry, sweep)

    def knows(self, cell_id: str) -> bool:
        """Whether the cell's demand was judged already."""
        return cell_id in self._demands

    def learn(self, cells: Iterable[CellRecord]) -> None:
        """Judge the demand of ``cells`` not judged yet."""
        for cell in cells:
            self.demand(cell)

    def demand(self, cell: CellRecord | str) -> Demand:
        """The cell's stored demand (read once per cell id; an id never learnt, or a cell
        without a stored demand, counts as needing nothing, of unknown length)."""
        if isinstance(cell, str):
            return self._demands.get(cell, _INVALID)
        known = self._demands.get(cell.cell_id)
        if known is None:
            known = self._demands[cell.cell_id] = stored_demand(cell) or _INVALID
            if self.siblings:
                self.durations.learn(cell)
        return known

    def sort(self, cells: Iterable[CellKey | CellRecord]) -> list[str]:
        """The ids of ``cells`` in launch order: one cell of each configuration not started
        yet (a probe), then the rest; each part longest expected first, then in registry
        order. Whole cells given are learnt; keys count as :meth:`demand` says."""
        keys: list[tuple[int, str]] = []
        for cell in cells:
            if isinstance(cell, CellRecord):
                self.demand(cell)
                keys.append((cell.index, cell.cell_id))
            else:
                keys.append((cell[1], cell[0]))
        ids = [cell_id for _, cell_id in sorted(keys)]
        if not self.longest_first:
            return ids
        if not self.siblings:
            return sorted(ids, key=lambda i: -self.demand(i).steps)  # stable: ties by index
        durations = self.durations
        probes = durations.probes(ids)
        return sorted(ids, key=lambda i: (i not in probes,
                                          -durations.expected(i, self.demand(i).steps)))

    def fitting(self, ordered: Sequence[str], slots: Callable[[int], int]) -> Iterator[str]:
        """The ids of ``ordered`` (already in launch order) that fit now, in order.
        ``slots(gpus)`` (how many more jobs of ``gpus`` GPUs could start now) is asked
        again after each cell the caller launched; free GPUs only shrink during a pass,
        so once ``g`` GPUs did not fit, no cell needing ``g`` or more is asked again."""
        if not ordered:
            return
        smallest = min(self.demand(i).gpus for i in ordered)
        blocked: int | None = None  # the fewest GPUs found not to fit in this pass
        for cell_id in ordered:
            need = self.demand(cell_id).gpus
            if blocked is not None and need >= blocked:
                continue
            if slots(need) <= 0:
                blocked = need
                if not self.backfill or need <= smallest:
                    return  # FIFO waits for its head; nothing smaller is left to try
                continue
            yield cell_id


def job_resources(demand: Demand, resources: Resources) -> JobResources:
    """What one launch of a cell of this ``demand`` asks its executor for: from its
    settings alone, never from a launch (which may fail for reasons of its moment)."""
    return JobResources(gpus=demand.gpus, nodes=demand.nodes,
                        cpus=max(resources.cpus, demand.min_cpus), hours=resources.hours,
                        self_placing=demand.self_placing)


def check_fit(cells: Iterable[tuple[str, Demand | None]], executor: Executor,
              resources: Resources) -> None:
    """Raise ``UserInputError`` if any ``(cell id, demand)`` asks for more than
    ``executor`` can ever give one job; one problem per distinct reason. A cell without
    a demand (never judged) is left to its launch, which fails it."""
    too_big: dict[str, list[str]] = {}
    verdicts: dict[JobResources, str | None] = {}  # a grid has few distinct requests
    for cell_id, demand in cells:
        if demand is None:
            continue
        need = job_resources(demand, resources)
        if need not in verdicts:
            verdicts[need] = executor.fits(need)
        why = verdicts[need]
        if why is not None:
            too_big.setdefault(why, []).append(cell_id)
    if not too_big:
        return
    problems = [Problem(
        "resources", f"{len(ids)} cell(s) could never start on the {executor.name} executor: {why}",
        found=f"cells {', '.join(i[:12] for i in ids[:3])}{', …' if len(ids) > 3 else ''}",
        fix="ask for fewer resources per cell (resources.cpus; the backend's GPU "
            "settings: device, verl's trainer.nnodes × n_gpus_per_node), or run where "
            "they exist (CUDA_VISIBLE_DEVICES; a bigger Ray cluster, or -E "
            "autoscaling=true for one that adds nodes on demand)") for why, ids in too_big.items()]
    raise UserInputError(
        f"cells ask for more than the {executor.name} executor can ever give one job", problems)
