"""A SIMULATED GPU cluster for kappa's real scheduler (a fake: no GPU exists here).

Everything kappa-side is real: the :class:`~orchestrator.scheduler.loop.SweepScheduler`
loop with its launch order, the SQLite registry in a temporary folder, run folders,
``summary.json`` / ``progress.json`` read back by the backend contract's own readers.
Only two things are stand-ins, and both follow kappa's contracts:

* :class:`SimBackend` — a backend whose settings carry a cell's GPUs, its steps and (for
  the fake job only) its true duration; ``launch`` returns an argv that *describes* the
  job instead of a trainer to run. The scheduler sees what it would see from verl:
  ``Backend.gpus`` and ``Backend.max_steps``; nothing in kappa reads ``sim_seconds``.
* :class:`SimCluster` — an :class:`~orchestrator.executors.Executor` with nodes of GPUs
  (best-fit placement of a job on one node) and a virtual clock. A job "runs" from its
  submit until ``now + sim_seconds``; when the clock passes its end it writes the files
  a finished trainer writes, and its GPUs are free again.

The registry stamps a cell's start and end (what kappa learns lengths from,
``orchestrator/scheduler/durations.py``) on the virtual clock too
(:func:`virtual_registry_clock`), and the launch order reads "now" from it; the sweep's
lease keeps the wall clock, whose seconds are real.

Virtual time: the loop pauses through ``JobHandle.wait(timeout)``. Here ``wait`` moves
the clock to the next job end in the whole cluster (or the timeout, if sooner) and
returns: the loop wakes exactly when something it must react to happens. A real loop
notices an end at most one poll interval (0.5 s) late; the simulation counts that as 0
(under 0.2 % of the makespans measured here), so hours of cluster time take seconds and
the makespan is exact.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.backends.base import Backend, Demand, LaunchSpec
from orchestrator.executors.base import Executor, JobHandle, JobResources
from orchestrator.grid.plan import SweepPlan
from orchestrator.spec.model import Resources

JOB_ARGV0 = "simulated-cell"
SPEC_TEXT = "name: sim\nbackend: simulated\nresources: {gpus: 1, hours: 2.0}\n"


def plan_json(name: str = "sim") -> str:
    """The stored plan of a simulated sweep (what a submit of :data:`SPEC_TEXT` records)."""
    return SweepPlan(name=name, backend="simulated",
                     resources=Resources(gpus=1, hours=2.0)).to_json()
Scenario = Literal["steps", "blind", "siblings"]
SEEDS_PER_CONFIG = 3  # the ``siblings`` scenario's seeds of each configuration
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # virtual time 0 on the registry's clock


class SimSettings(BaseModel):
    """A simulated cell: its GPUs (on one node), steps, and true duration (the fake job's)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    gpus: int = Field(ge=1, le=8)
    max_steps: int = Field(ge=1)
    sim_seconds: float = Field(gt=0)
    seed: int = 0
    # The rest of a real cell's settings (model, data, optimizer): a realistic row size in
    # bench/registry_scale.py; which configuration a cell is in the ``siblings`` scenario.
    config: dict[str, str | int | float | bool] = Field(default_factory=dict)


class SimBackend(Backend):
    """The simulated backend (see the module docstring)."""

    name: ClassVar[str] = "simulated"
    settings_model: ClassVar[type[BaseModel]] = SimSettings
    # Cells equal but for these do the same work: the seed, as for any backend, and the
    # fake job's true duration, which kappa must not see (a real cell's settings carry
    # no such thing; counting it would make every cell a configuration of its own).
    work_free_settings: ClassVar[frozenset[str]] = frozenset({"seed", "sim_seconds"})

    def launch(self, settings: Mapping[str, Any], run_dir: Path, demand: Demand) -> LaunchSpec:
        """An argv that describes the fake job: its duration and steps."""
        return LaunchSpec(argv=(JOB_ARGV0, repr(float(settings["sim_seconds"])),
                                str(int(settings["max_steps"]))), gpus=demand.gpus)

    def gpus(self, settings: BaseModel) -> int:
        """The cell's GPUs."""
        assert isinstance(settings, SimSettings)
        return settings.gpus


@dataclass
class SimJob(JobHandle):
    """One fake job on the simulated cluster."""

    cluster: SimCluster
    job_id: str
    node: int
    gpus: int
    start: float
    end: float
    steps: int
    cwd: Path
    done: bool = False

    def poll(self) -> int | None:
        """0 once the virtual clock has passed its end."""
        self.cluster.settle()
        return 0 if self.done else None

    def wait(self, timeout: float | None = None) -> int | None:
        """Move the clock to the next end in the cluster (or ``timeout`` virtual seconds)."""
        limit = math.inf if timeout is None else self.cluster.now + timeout
        self.cluster.advance(limit)
        return self.poll()

    def cancel(self) -> None:
        """End the job now (its GPUs are freed)."""
        if not self.done:
            self.end = min(self.end, self.cluster.now)
            self.cluster.settle()


@dataclass
class SimCluster(Executor):
    """Nodes of GPUs on a virtual clock (see the module docstring)."""

    name = "simulated"
    job_id_prefix = "sim:"

    node_gpus: list[int]
    now: float = 0.0
    jobs: dict[str, SimJob] = field(default_factory=dict)
    refused: int = 0
    peak_busy: int = 0
    busy_seconds: float = 0.0  # GPU-seconds of finished jobs
    submits: dict[str, int] = field(default_factory=dict)  # run folder -> times submitted
    _free: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._free = list(self.node_gpus)

    @property
    def total_gpus(self) -> int:
        """GPUs in the whole cluster."""
        return sum(self.node_gpus)

    @property
    def busy(self) -> int:
        """GPUs held by running jobs now."""
        return self.total_gpus - sum(self._free)

    @property
    def makespan(self) -> float:
        """Virtual seconds from the first submit to the last end."""
        return max((j.end for j in self.jobs.values()), default=0.0)

    def submit(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: Path,
               log_path: Path, resources: JobResources = JobResources()) -> JobHandle:
        """Place the job on the fullest node it fits on, or refuse (raise)."""
        if argv[:1] != (JOB_ARGV0,):
            raise ValueError(f"the simulated cluster runs only simulated cells, not {argv[:1]}")
        seconds, steps = float(argv[1]), int(argv[2])
        self.settle()
        fits = [n for n, free in enumerate(self._free) if free >= resources.gpus]
        if resources.nodes != 1 or not fits:
            self.refused += 1
            raise RuntimeError(f"no node has {resources.gpus} free GPUs")
        node = min(fits, key=lambda n: self._free[n])  # best fit keeps whole nodes free
        self._free[node] -= resources.gpus
        self.peak_busy = max(self.peak_busy, self.busy)
        job = SimJob(self, f"sim:{len(self.jobs)}", node, resources.gpus, self.now,
                     self.now + seconds, steps, cwd)
        self.jobs[job.job_id] = job
        self.submits[str(cwd)] = self.submits.get(str(cwd), 0) + 1
        return job

    def capacity(self, gpus: int = 0) -> int:
        """How many more jobs of ``gpus`` GPUs would fit now (any number without GPUs)."""
        self.settle()
        if gpus <= 0:
            return 1_000_000
        return sum(free // gpus for free in self._free)

    def most_gpus(self) -> int:
        """The largest node."""
        return max(self.node_gpus)

    def reattach(self, job_id: str) -> JobHandle | None:
        """A job of this cluster by id."""
        return self.jobs.get(job_id)

    def advance(self, limit: float) -> None:
        """Move the clock to the next job end, or to ``limit`` if that comes first."""
        ends = [j.end for j in self.jobs.values() if not j.done]
        self.now = max(self.now, min([limit, *ends]))
        self.settle()

    def settle(self) -> None:
        """Finish the jobs whose end the clock has reached: free their GPUs and write
        what a finished trainer leaves in its run folder."""
        for job in self.jobs.values():
            if job.done or job.end > self.now:
                continue
            job.done = True
            self._free[job.node] += job.gpus
            self.busy_seconds += job.gpus * (job.end - job.start)
            job.cwd.mkdir(parents=True, exist_ok=True)
            (job.cwd / "progress.json").write_text(
                json.dumps({"step": job.steps, "total_steps": job.steps}))
            (job.cwd / "summary.json").write_text(
                json.dumps({"status": "succeeded", "steps": job.steps, "final": {}}))


@dataclass(frozen=True)
class SimCell:
    """A cell as ``Registry.add_cells`` takes it."""

    cell_id: str
    index: int
    axes: dict[str, Any]
    settings: dict[str, Any]
    labels: dict[str, Any] = field(default_factory=dict)


def add_sim_cells(registry: Any, sweep: str, cells: list[SimCell]) -> list[Any]:
    """``registry.add_cells`` with each cell's demand judged as a submit judges it."""
    backend = SimBackend()
    demands = {c.cell_id: backend.demand(backend.settings_model.model_validate(c.settings))
               for c in cells}
    return list(registry.add_cells(sweep, cells,
                                   demands={k: d.to_json() for k, d in demands.items()}))


def draw_cells(n: int, seed: int, scenario: Scenario = "steps",
               median_hours: float = 2.0, seed_noise: float = 0.0) -> list[SimCell]:
    """``n`` cells of 1, 2, 4 or 8 GPUs (uniformly).

    ``steps``: each cell trains 100, 200, 400 or 800 steps and takes steps/200 ×
    ``median_hours`` × lognormal(0, 0.3) hours: its length is what its steps say, up to
    the noise of real runs. ``blind``: every cell trains 200 steps and takes
    ``median_hours`` × lognormal(0, 0.8): nothing kappa can see tells long cells from
    short ones. Both in random registry order, every cell a configuration of its own.

    ``siblings``: as ``blind``, but in configurations of :data:`SEEDS_PER_CONFIG` seeds in
    grid order (seeds adjacent); a configuration's GPUs and length are drawn once and
    shared by its seeds (each seed's length × lognormal(0, ``seed_noise``)): nothing a
    cell declares predicts its length, its siblings' runs do.
    """
    rng = random.Random(seed)
    cells = []
    config: dict[str, int] = {}
    gpus, hours = 1, median_hours
    for i in range(n):
        if scenario == "siblings":
            if i % SEEDS_PER_CONFIG == 0:
                config = {"config": i // SEEDS_PER_CONFIG}
                gpus = rng.choice((1, 2, 4, 8))
                hours = median_hours * math.exp(rng.gauss(0.0, 0.8))
            settings = {"gpus": gpus, "max_steps": 200, "seed": i % SEEDS_PER_CONFIG,
                        "sim_seconds": round(hours * math.exp(rng.gauss(0.0, seed_noise))
                                             * 3600, 3), "config": dict(config)}
            cells.append(SimCell(f"{seed:04x}{i:08x}", i, {**config, "seed": settings["seed"]},
                                 settings))
            continue
        gpus = rng.choice((1, 2, 4, 8))
        if scenario == "steps":
            steps = rng.choice((100, 200, 400, 800))
            hours = steps / 200 * median_hours * math.exp(rng.gauss(0.0, 0.3))
        else:
            steps = 200
            hours = median_hours * math.exp(rng.gauss(0.0, 0.8))
        settings = {"gpus": gpus, "max_steps": steps, "sim_seconds": round(hours * 3600, 3),
                    "seed": i}
        cells.append(SimCell(f"{seed:04x}{i:08x}", i, {"cell": i}, settings))
    return cells


def lower_bound(cells: list[SimCell], total_gpus: int) -> float:
    """max(total GPU-seconds / GPUs, longest cell): no schedule can end sooner."""
    area = sum(c.settings["gpus"] * c.settings["sim_seconds"] for c in cells)
    return max(area / total_gpus, max(c.settings["sim_seconds"] for c in cells))


@contextlib.contextmanager
def kappa_home(path: Path) -> Iterator[None]:
    """``KAPPA_HOME`` set to ``path`` for the block (run folders, the sweep lock)."""
    before = os.environ.get("KAPPA_HOME")
    os.environ["KAPPA_HOME"] = str(path)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("KAPPA_HOME", None)
        else:
            os.environ["KAPPA_HOME"] = before


@contextlib.contextmanager
def virtual_registry_clock(cluster: SimCluster) -> Iterator[Callable[[], datetime]]:
    """For the block, the registry stamps cells' times on ``cluster``'s virtual clock
    (every registry module's ``utcnow`` but the lease's); yields that clock. The sweep's
    lease keeps wall time: its heartbeats and expiry are real seconds."""
    from unittest import mock

    from orchestrator.registry import models

    def now() -> datetime:
        return EPOCH + timedelta(seconds=cluster.now)

    wall = models.utcnow
    with contextlib.ExitStack() as stack:
        for name, module in list(sys.modules.items()):
            if (name.startswith("orchestrator.registry.") and name != "orchestrator.registry."
                    "leases" and getattr(module, "utcnow", None) is wall):
                stack.enter_context(mock.patch.object(module, "utcnow", now))
        yield now


@dataclass(frozen=True)
class SimResult:
    """One simulated sweep: its makespan against the bound, and the cluster's record."""

    makespan: float
    bound: float
    cluster: SimCluster
    counts: dict[str, int]
    launches: list[Launch]

    @property
    def clock_virtual(self) -> bool:
        """Whether the registry recorded every cell's duration on the virtual clock."""
        return all(abs(x.recorded_seconds - (x.end - x.start)) < 1e-3 for x in self.launches)

    @property
    def ratio(self) -> float:
        """Makespan over the lower bound (1.0 is optimal)."""
        return self.makespan / self.bound


def simulate(cells: list[SimCell], node_gpus: list[int], order: str = "kappa",
             sample_limit: int | None = None) -> SimResult:
    """Run ``cells`` through kappa's scheduler on a simulated cluster; ``order`` is
    ``kappa`` (its launch order: lengths learnt from siblings), ``steps`` (longest declared
    steps first: kappa's order before it learnt from siblings), ``backfill`` (registry
    order with backfill) or ``fifo`` (strict registry order). ``sample_limit``: kappa's
    estimates use only the first N finished siblings of each configuration."""
    from orchestrator.registry import Registry
    from orchestrator.scheduler.hooks import NullTracker
    from orchestrator.scheduler.options import SchedulerOptions
    from orchestrator.scheduler.order import LaunchOrder
    from orchestrator.sweeps.driver import build_scheduler

    backend = SimBackend()
    cluster = SimCluster(list(node_gpus))
    with tempfile.TemporaryDirectory(prefix="kappa-sim-", dir=_fast_tmp()) as tmp, \
            kappa_home(Path(tmp)), virtual_registry_clock(cluster) as clock, \
            Registry.open(f"sqlite:///{tmp}/registry.db") as registry:
        kappa = LaunchOrder.for_backend(backend)
        kappa.durations.clock, kappa.durations.sample_limit = clock, sample_limit
        orders = {"kappa": kappa, "steps": LaunchOrder(siblings=False),
                  "backfill": LaunchOrder(longest_first=False),
                  "fifo": LaunchOrder(longest_first=False, backfill=False)}
        registry.upsert_sweep("sim", backend=SimBackend.name, spec_text=SPEC_TEXT,
                              plan=plan_json())
        add_sim_cells(registry, "sim", cells)
        # The poll interval only bounds a pause in which no job ends: events wake the
        # loop (see the module docstring), so an hour of virtual time is plenty.
        options = SchedulerOptions(poll_interval=3600.0, retry_backoff=60.0)
        scheduler = build_scheduler(registry, registry.get_sweep("sim"), backend, cluster,
                                    NullTracker(), options, order=orders[order])
        counts = {state.value: n for state, n in scheduler.run().items()}
        stamped = {c.cell_id: (c.finished_at - c.started_at).total_seconds()
                   for c in registry.cells("sim") if c.started_at and c.finished_at}
    jobs = {job.cwd.name: job for job in cluster.jobs.values()}
    launches = [Launch(c, jobs[c.cell_id].start, jobs[c.cell_id].end,
                       stamped.get(c.cell_id, math.nan)) for c in cells]
    return SimResult(cluster.makespan, lower_bound(cells, cluster.total_gpus), cluster, counts,
                     launches)


@dataclass(frozen=True)
class Launch:
    """A cell's job: its start and end (virtual seconds), and its duration as recorded."""

    cell: SimCell
    start: float
    end: float
    recorded_seconds: float


def _fast_tmp() -> str | None:
    """A memory-backed folder when there is one: the registry's commits are then not
    disk syncs, which would only slow the simulation (the makespan is virtual time)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
