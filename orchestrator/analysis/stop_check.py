"""``kappa stop-check``'s figures: stopping rules replayed on a finished full-length sweep
(:mod:`.replay`), and what they would have changed in its comparisons.

For one metric and one compared axis (``AXIS=BASE``), cells are paired by seed within
each comparison row (the cells equal in every other axis). For every treatment value
and row: the paired delta at full length with its 95% paired t-interval over seeds (as
``kappa table``'s), the delta where the rules would have stopped, the steps the pairs were
compared at, and the steps saved; for every row and value, the mean over seeds (Student t
interval) likewise.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import paths
from orchestrator.analysis.combined import value_text
from orchestrator.analysis.seed_check import cell_hours, ran_share, row_name
from orchestrator.analysis.stats import t_interval
from orchestrator.backends import get_backend
from orchestrator.errors import Problem, UserInputError
from orchestrator.grid.plan import SweepPlan, stored_plan
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.spec.block_file import read_stop_rules
from orchestrator.spec.settings_paths import did_you_mean
from orchestrator.stopping.replay import FinishedCell, Replayed, replay
from orchestrator.stopping.rules import MetricHistory

if TYPE_CHECKING:
    from orchestrator.spec.stop_block import StopRules


@dataclass(frozen=True)
class Comparison:
    """One number of the table at full length and where the rules stop: a ``mean`` of a
    row and value, or a ``delta`` of a treatment against the base. Values in the
    metric's units (:attr:`StopCheck.scale` turns them into points)."""

    kind: str
    row: str
    value: str
    full: float
    low: float | None
    high: float | None
    stopped: float
    steps: tuple[int, ...]
    n: int

    @property
    def within(self) -> bool | None:
        """Whether the stopped value lies in the full run's interval (``None``: no CI)."""
        if self.low is None or self.high is None:
            return None
        return self.low - 1e-12 <= self.stopped <= self.high + 1e-12

    @property
    def sign_changed(self) -> bool:
        """A delta whose sign differs between full length and the rules' stop."""
        return self.kind == "delta" and self.full * self.stopped < 0


@dataclass(frozen=True)
class StopCheck:
    """The replay's figures for one sweep (see the module docstring)."""

    metric: str
    axis: str
    base: str
    steps_full: int
    steps_stopped: int
    hours_full: float
    hours_stopped: float
    stopped_cells: int
    cells: int
    comparisons: tuple[Comparison, ...] = field(default=())
    scale: float = 1.0

    def count(self, kind: str) -> tuple[int, int, int]:
        """``(within CI, with a CI, sign changes)`` among comparisons of ``kind``."""
        rows = [c for c in self.comparisons if c.kind == kind]
        return (sum(1 for c in rows if c.within), sum(1 for c in rows if c.within is not None),
                sum(1 for c in rows if c.sign_changed))

    def as_json(self) -> dict[str, Any]:
        """For ``--json`` and the benchmark."""
        figures = {k: v for k, v in vars(self).items() if k not in ("comparisons", "scale")}
        return {
            **figures, "means_within": self.count("mean"), "deltas_within": self.count("delta"),
            "comparisons": [{**c.__dict__, "within": c.within, "sign_changed": c.sign_changed}
                            for c in self.comparisons]}


def check(cells: Sequence[FinishedCell], replayed: Sequence[Replayed],
          wall_hours: Mapping[str, float], metric: str, axis: str, base: str,
          seed_axis: str = "seed") -> StopCheck:
    """The figures of one replay (see the module docstring). ``wall_hours``: each cell's
    measured hours at full length (saved hours scale them by the steps not run)."""
    by_id = {r.cell_id: r for r in replayed}
    full: dict[tuple[str, str], dict[Any, tuple[float, float, int]]] = defaultdict(dict)
    for cell in cells:
        done = by_id[cell.cell_id]
        if not cell.succeeded or metric not in cell.history.series or done.failed:
            continue
        row = row_name(cell.axes, axis, seed_axis)
        final = cell.history.points(metric)[-1][1]
        at = done.values.get(metric, float("nan"))
        full[(row, value_text(cell.axes.get(axis)))][cell.axes.get(seed_axis)] = (
            final, at, done.step if done.step is not None else done.full_step)
    out: list[Comparison] = []
    for (row, value), seeds in sorted(full.items()):
        iv = t_interval([v[0] for v in seeds.values()])
        out.append(Comparison("mean", row, value, iv.estimate, iv.low, iv.high,
                              sum(v[1] for v in seeds.values()) / len(seeds),
                              tuple(sorted({v[2] for v in seeds.values()})), len(seeds)))
        if value == base or (row, base) not in full:
            continue
        bases = full[(row, base)]
        common = sorted((s for s in seeds if s in bases), key=str)
        if not common:
            continue
        delta = t_interval([seeds[s][0] - bases[s][0] for s in common])
        stopped = sum(seeds[s][1] - bases[s][1] for s in common) / len(common)
        steps = {seeds[s][2] for s in common} | {bases[s][2] for s in common}
        out.append(Comparison("delta", row, value, delta.estimate, delta.low, delta.high,
                              stopped, tuple(sorted(steps)), len(common)))
    steps_full = sum(r.full_step for r in replayed)
    steps_stopped = sum(r.step if r.step is not None else r.full_step for r in replayed)
    hours_full = sum(wall_hours.get(r.cell_id, 0.0) for r in replayed)
    hours_stopped = sum(wall_hours.get(r.cell_id, 0.0) * ran_share(r) for r in replayed)
    values = [c.full for c in out if c.kind == "mean"]
    scale = 100.0 if values and all(0.0 <= v <= 1.0 for v in values) else 1.0
    return StopCheck(metric, axis, base, steps_full, steps_stopped, hours_full, hours_stopped,
                     sum(1 for r in replayed if r.step is not None), len(replayed),
                     tuple(out), scale)


def render(result: StopCheck, rules_text: str) -> str:
    """The report ``kappa stop-check`` prints (markdown)."""
    s = result.scale
    unit = " (points)" if s == 100.0 else ""
    saved = 1 - result.steps_stopped / result.steps_full if result.steps_full else 0.0
    hours = 1 - result.hours_stopped / result.hours_full if result.hours_full else 0.0
    lines = [f"Rules: {rules_text}",
             f"Metric: {result.metric}{unit}; compared: {result.axis} vs {result.base}, "
             "paired by seed",
             f"RL steps: {result.steps_stopped:,} of {result.steps_full:,} ({saved:.0%} saved); "
             f"cell-hours: {result.hours_stopped:.3f} of {result.hours_full:.3f} "
             f"({hours:.0%} saved); {result.stopped_cells} of {result.cells} cells stop early",
             "", "| kind | row | value | full length | full 95% CI | at the rules' stop | "
             "compared at step | within CI | sign |", "|---|---|---|---:|---|---:|---|---|---|"]
    for c in result.comparisons:
        ci = (f"[{c.low * s:+.2f}, {c.high * s:+.2f}]" if c.low is not None
              and c.high is not None else "—")
        inside = {True: "yes", False: "NO", None: "—"}[c.within]
        sign = "CHANGED" if c.sign_changed else ("same" if c.kind == "delta" else "")
        fmt = "+.2f" if c.kind == "delta" else ".2f"
        steps = ", ".join(str(x) for x in c.steps)
        lines.append(f"| {c.kind} | {c.row or '—'} | {c.value} | {c.full * s:{fmt}} | {ci} | "
                     f"{c.stopped * s:{fmt}} | {steps} | {inside} | {sign} |")
    for kind, name in (("mean", "means"), ("delta", "deltas")):
        within, known, flips = result.count(kind)
        if known or flips:
            lines.append(f"{name}: {within} of {known} inside the full run's 95% CI"
                         + (f"; {flips} change sign" if kind == "delta" else ""))
    return "\n".join(lines) + "\n"


def load(sweep: str, registry_url: str | None = None) -> tuple[SweepPlan, list[CellRecord]]:
    """The sweep's stored plan and its cells (``UserInputError`` for an unknown sweep)."""
    with Registry.open(paths.registry_url(registry_url), create=False) as reg:
        record = reg.get_sweep(sweep)
        cells = reg.cells(sweep)
    return stored_plan(record.name, record.plan), cells


def finished_cells(cells: Sequence[CellRecord], backend_name: str) -> list[FinishedCell]:
    """Each cell with its whole logged history, read from its run folder."""
    backend = get_backend(backend_name)
    out = []
    for cell in cells:
        history = MetricHistory()
        if cell.run_dir and Path(cell.run_dir).is_dir():
            history.add(backend.read_metrics(Path(cell.run_dir), None).rows)
        out.append(FinishedCell(cell.cell_id, dict(cell.axes),
                                cell.state is CellState.SUCCEEDED, history, cell.total_steps))
    return out


def check_sweep(plan: SweepPlan, cells: Sequence[CellRecord], rules: StopRules,
                metric: str | None, axis: str, base: str, seed_axis: str = "seed") -> StopCheck:
    """:func:`check` of ``rules`` replayed on a finished sweep's cells (``metric``
    default: the rules' plateau or threshold metric)."""
    name = metric or sorted(rules.group_metrics())[0]
    finished = finished_cells(cells, plan.backend)
    logged = sorted(set().union(*(c.history.series for c in finished)))
    if name not in logged:  # else every figure would be empty, and exit 0
        shown = ", ".join(logged[:40]) + (f", ... ({len(logged) - 40} more)"
                                          if len(logged) > 40 else "")
        raise UserInputError(f"no cell of the sweep logged {name!r}", [Problem(
            "--metric" if metric else "--rules", "a metric no cell logged", found=repr(name),
            allowed=shown or "(no cell logged a metric)",
            fix=did_you_mean(name, logged) or "name a metric the cells logged")])
    hours = {c.cell_id: cell_hours(c) for c in cells}
    return check(finished, replay(finished, rules), hours, name, axis, base, seed_axis)


def chosen_rules(sweep: str, plan: SweepPlan, cells: Sequence[CellRecord],
                 rules_file: Path | None, together: str | None) -> StopRules:
    """The rules to replay on the finished ``sweep``: ``rules_file``'s (a ``stop:`` block,
    or a file holding one), else the sweep's own; ``together`` (comma-separated axes)
    replaces theirs. ``UserInputError`` without a rule to replay, for an axis the sweep
    lacks, or while a cell has not finished."""
    if rules_file is None:
        rules = plan.stop
        if rules is None or not rules.group_metrics():
            raise UserInputError("no rules to replay", [Problem(
                "--rules", "the sweep has no plateau or threshold rule of its own",
                fix="give --rules rules.yaml holding e.g. stop: {plateau: {metric: ..., "
                    "min_steps: 40, patience: 15}, together: [reward_budget]}")])
    else:
        rules = read_stop_rules(rules_file)
        if not rules.group_metrics():
            raise UserInputError(f"no rules to replay in {rules_file}", [Problem(
                "--rules", "a plateau or threshold rule is needed", found=describe(rules),
                fix="add plateau: {metric: ..., min_steps: N, patience: M}")])
    if together is not None:
        rules = rules.model_copy(update={"together": tuple(
            a.strip() for a in together.split(",") if a.strip())})
    known = [*plan.axes, *plan.labels]
    bad = [a for a in rules.together if a not in known]
    if bad:
        raise UserInputError("together: names an axis the sweep does not have", [Problem(
            "--together", f"{bad[0]!r} is not an axis of {sweep}", found=", ".join(bad),
            allowed=", ".join(known), fix="name axes the sweep's results compare")])
    unfinished = [c for c in cells if not c.is_terminal]
    if unfinished:
        raise UserInputError(f"sweep {sweep} has not finished", [Problem(
            "sweep", f"{len(unfinished)} cell(s) still pending or running",
            fix="wait for it (kappa submit --wait / kappa status), then replay")])
    return rules


def parse_delta(delta: str) -> tuple[str, str]:
    """``(axis, base value)`` of ``--delta AXIS=BASE`` (malformed: ``UserInputError``)."""
    axis, sep, base = delta.partition("=")
    if not sep or not axis:
        raise UserInputError("invalid --delta", [Problem(
            "--delta", "expected AXIS=BASE", found=delta, fix="e.g. reward_budget=false")])
    return axis, base


def compared_axis(delta: str | None, rules: StopRules,
                  cells: Sequence[CellRecord]) -> tuple[str, str]:
    """``(axis, base value)`` of ``--delta AXIS=BASE``, else the rules' one together axis
    against its first value."""
    if delta is not None:
        axis, base = parse_delta(delta)
        axes = sorted({a for c in cells for a in c.axes})
        values = sorted({value_text(c.axes[axis]) for c in cells if axis in c.axes})
        if not values:
            raise UserInputError("--delta: not an axis of the sweep", [Problem(
                "--delta", f"the sweep has no axis {axis!r}", found=delta,
                allowed=", ".join(axes), fix="name one of its axes: AXIS=BASE")])
        if base not in values:  # else no row would have a base, and every delta be missing
            raise UserInputError("--delta: a value the axis never takes", [Problem(
                "--delta", f"{axis} never takes {base!r}", found=delta,
                allowed=", ".join(values), fix=f"e.g. --delta {axis}={values[0]}")])
        return axis, base
    if len(rules.together) != 1:
        raise UserInputError("which axis to compare?", [Problem(
            "--delta", "the rules compare no single axis", found=", ".join(rules.together),
            fix="give --delta AXIS=BASE, e.g. --delta reward_budget=false")])
    axis = rules.together[0]
    values = [c.axes[axis] for c in sorted(cells, key=lambda c: c.index) if axis in c.axes]
    return axis, value_text(values[0]) if values else ""


def describe(rules: StopRules) -> str:
    """The rules as the report's first line shows them (JSON, without the GPU-hours cap)."""
    return json.dumps(rules.model_dump(exclude_defaults=True, by_alias=True,
                                       exclude={"gpu_hours"}), default=str)
