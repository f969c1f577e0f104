"""Build an ablation table (:class:`Table`) from a results frame and a :class:`TableSpec`.

Every cell of the frame that matches ``where`` lands in exactly one row; cells that did
not succeed are never dropped silently: a row without usable runs shows ``—`` with the
states of its cells, and the ``n`` column says how many seeds each number rests on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

import orchestrator.analysis.tables.compared as compared
import orchestrator.analysis.tables.numerics as numerics
import orchestrator.analysis.tables.provenance as provenance
from orchestrator.analysis.frame import (
    STEP_COLUMNS,
    STOP_COLUMN,
    SUCCEEDED,
    axis_column,
    axis_names,
    hashable_value,
    varying_axes,
)
from orchestrator.analysis.stats import t_interval
from orchestrator.analysis.tables.labels import (
    delta_label,
    display_axis,
    display_value,
    value_matches,
)
from orchestrator.analysis.tables.model import Label, Table, TableBlock, TableCell, TableRow
from orchestrator.analysis.tables.spec import TableSpec
from orchestrator.analysis.tables.validate import metric_globs, placements, validate
from orchestrator.errors import Problem, UserInputError

if TYPE_CHECKING:
    import pandas as pd

AVERAGE = "Average"
NO_CELLS = "not run"


@dataclass(frozen=True)
class _Group:
    """The runs behind one row: per-seed values of every column, and the other cells' states."""

    n_total: int
    seeds: tuple[Hashable, ...]
    values: np.ndarray  # (succeeded runs, columns)
    other_states: Counter[str]
    all_seeds: frozenset[Hashable] = frozenset()  # every cell's seed, failed ones included
    lengths: tuple[compared.RunLength, ...] = ()  # per succeeded run, as ``seeds``
    sweeps: tuple[str, ...] = ()  # of every cell, in order of appearance
    settings: tuple[str, ...] = ()  # what differs from another sweep's same cells
    keys: tuple[numerics.Key, ...] = ()  # per succeeded run, as ``seeds``: its numerics

    def state_text(self) -> str:
        if self.n_total == 0:
            return NO_CELLS
        if not self.other_states:
            return "no metric"
        parts = [s if c == 1 else f"{s}×{c}" for s, c in sorted(self.other_states.items())]
        return ", ".join(parts)

    def n_text(self) -> str:
        return _fraction(len(self.seeds), self.n_total)


def _fraction(used: int, total: int) -> str:
    """``n`` as printed: ``3``, or ``2/3`` when some runs could not be used."""
    return str(used) if used == total else f"{used}/{total}"


_EMPTY = _Group(0, (), np.zeros((0, 0)), Counter())


def _filter(frame: pd.DataFrame, spec: TableSpec) -> pd.DataFrame:
    for name, text in spec.where.items():
        frame = frame[[value_matches(v, text) for v in frame[axis_column(name)]]]
    if frame.empty:
        # Each value exists (validated), but no cell has all of them at once.
        raise UserInputError("no cell matches every --where filter together", [Problem(
            "--where", "these filters exclude every cell",
            found=", ".join(f"{a}={v}" for a, v in spec.where.items()),
            fix="drop or change one of the --where filters")])
    return frame


def _check_unplaced(frame: pd.DataFrame, spec: TableSpec) -> None:
    placed = sorted({spec.seed_axis, *(axis for _, axis in placements(spec))})
    loose = varying_axes(frame, exclude=placed)
    if loose:
        raise UserInputError("the table would mix cells that differ in other axes", [Problem(
            "--rows", f"axis '{a}' varies but is not placed in the table",
            found=", ".join(sorted({str(v) for v in frame[axis_column(a)]})),
            fix=f"add it to --rows, compare it with --delta {a}=BASE, or pick one value "
                f"with --where {a}=VALUE") for a in loose])


def _scale_factor(values: np.ndarray, scale: str) -> float:
    if scale != "auto":
        return 100.0 if scale == "points" else 1.0
    finite = values[np.isfinite(values)]
    return 100.0 if finite.size > 0 and bool(np.all((finite >= 0.0) & (finite <= 1.0))) else 1.0


def _lengths(frame: pd.DataFrame) -> list[compared.RunLength]:
    """Each run's last step and whether it ended before its full length."""
    if not set(STEP_COLUMNS) <= set(frame.columns):
        return [compared.RunLength(None, False)] * len(frame)
    reasons = frame[STOP_COLUMN] if STOP_COLUMN in frame.columns else [None] * len(frame)
    return [compared.run_length(r, s, t) for r, s, t in
            zip(reasons, frame["step"], frame["total_steps"], strict=True)]


def _groups(frame: pd.DataFrame, spec: TableSpec, key_cols: list[list[Any]],
            values: np.ndarray) -> dict[tuple[Any, ...], _Group]:
    """Runs grouped by the key columns, each with per-seed values and non-success states."""
    # Without a seed axis every group holds one run; they pair with each other.
    seeds_all = ([hashable_value(v) for v in frame[axis_column(spec.seed_axis)]]
                 if spec.seed_axis in axis_names(frame) else [None] * len(frame))
    states = list(frame["state"])
    sweeps = [str(s) for s in frame["sweep"]]
    lengths = _lengths(frame)
    keys = numerics.run_keys(frame)
    members: dict[tuple[Any, ...], list[int]] = {}
    for i in range(len(frame)):
        members.setdefault(tuple(col[i] for col in key_cols), []).append(i)
    out: dict[tuple[Any, ...], _Group] = {}
    for key, idx in members.items():
        ok = [i for i in idx if states[i] == SUCCEEDED and np.isfinite(values[i]).any()]
        other = Counter(str(states[i]) for i in idx if states[i] != SUCCEEDED)
        out[key] = _Group(len(idx), tuple(seeds_all[i] for i in ok), values[ok], other,
                          frozenset(seeds_all[i] for i in idx), tuple(lengths[i] for i in ok),
                          tuple(dict.fromkeys(sweeps[i] for i in idx)),
                          provenance.settings_texts(frame, idx), tuple(keys[i] for i in ok))
    return out


def _absolute_cells(group: _Group, spec: TableSpec, n_cols: int) -> tuple[TableCell, ...]:
    cells = []
    for j in range(n_cols):
        column = group.values[:, j] if group.values.size else np.zeros(0)
        if not np.isfinite(column).any():
            cells.append(TableCell(None, "absolute", missing=group.state_text()))
        else:
            iv = t_interval(column, spec.confidence)
            cells.append(TableCell(iv, "absolute", partial=iv.n < len(group.seeds)))
    return tuple(cells)


def _delta_cells(
    base: _Group, treat: _Group, spec: TableSpec, n_cols: int, treatment: str = "treatment"
) -> tuple[tuple[TableCell, ...], str, str | None, str | None]:
    """Delta cells, the row's ``n`` (seeds paired, out of the seeds either side has), the
    step its pairs were compared at when some stopped early (:mod:`.compared`) and what
    differs in the numerics of the paired runs (:mod:`.numerics`)."""
    base_seeds = set(base.seeds)
    common = [s for s in treat.seeds if s in base_seeds]
    if not common:
        reason = treat.state_text() if not treat.seeds else "no base run"
        missing = tuple(TableCell(None, "delta", missing=reason) for _ in range(n_cols))
        return missing, _fraction(0, len(base.all_seeds | treat.all_seeds)), None, None
    b_rows = [base.seeds.index(s) for s in common]
    t_rows = [treat.seeds.index(s) for s in common]
    # A paired delta is the mean of the per-seed differences, with their t-interval.
    cells: list[TableCell] = []
    for column in (treat.values[t_rows] - base.values[b_rows]).T:
        diffs = column[np.isfinite(column)]
        if diffs.size == 0:
            cells.append(TableCell(None, "delta", missing="no metric"))
            continue
        iv = t_interval(diffs, spec.confidence)
        cells.append(TableCell(iv, "delta", partial=iv.n < len(common),
                               differences=tuple(diffs.tolist())))
    note = None
    if base.lengths and treat.lengths:
        note = compared.compare_note([(s, base.lengths[b], treat.lengths[t]) for s, b, t in
                                      zip(common, b_rows, t_rows, strict=True)], treatment)
    differ = numerics.note([*(base.keys[b] for b in b_rows), *(treat.keys[t] for t in t_rows)]
                           if base.keys and treat.keys else [])
    # Seeds on either side, failed ones included: a pair lost to a failure shows as 2/3.
    return tuple(cells), _fraction(len(common), len(base.all_seeds | treat.all_seeds)), note, differ


def _embolden(rows: list[TableRow], spec: TableSpec) -> list[TableRow]:
    """Bold the best value per column, separately among absolute rows and among delta rows."""
    sign = 1.0 if spec.higher_is_better else -1.0
    cells = [list(r.cells) for r in rows]
    n_cols = len(rows[0].cells) if rows else 0
    for kind in ("absolute", "delta"):
        members = [i for i, r in enumerate(rows) if r.kind == kind]
        for j in range(n_cols):
            scored = [(i, round(sign * iv.estimate, spec.digits)) for i in members
                      if (iv := rows[i].cells[j].interval) is not None]
            if len(scored) < 2:
                continue
            best = max(s for _, s in scored)
            for i, s in scored:
                if s == best:
                    cells[i][j] = replace(cells[i][j], bold=True)
    return [replace(r, cells=tuple(c)) for r, c in zip(rows, cells, strict=True)]


def _stopped_note(frame: pd.DataFrame) -> str | None:
    """A note when stopping rules ended some of the table's runs early (they count)."""
    if STOP_COLUMN not in frame.columns:
        return None
    rules = Counter(
        str(reason).split(" ")[0]
        for state, reason in zip(frame["state"], frame[STOP_COLUMN], strict=True)
        if state == SUCCEEDED and isinstance(reason, str) and reason)
    if not rules:
        return None
    kinds = ", ".join(f"{rule} {count}" for rule, count in sorted(rules.items()))
    return (f"{sum(rules.values())} of {len(frame)} runs were stopped early by a stopping rule "
            f"({kinds}); a stopped run is finished: its numbers are its final evaluation where "
            "it stopped.")


def _notes(spec: TableSpec, factor: float, has_delta: bool, partial: bool,
           stopped: str | None = None) -> tuple[str, ...]:
    pct = round(spec.confidence * 100)
    notes = []
    if factor == 100.0:
        notes.append("Scores in points (accuracy × 100).")
    ci = f" ± {pct}% CI (Student t) when n ≥ 2" if spec.show_ci else ""
    notes.append(f"n = seeds each number rests on (succeeded/total); mean over seeds{ci}.")
    if partial:
        notes.append("(n=k) after a number: it rests on k runs only (a metric some runs lack).")
    if has_delta:
        interval = "[low, high] = " if spec.show_ci else ""
        notes.append("Delta rows: signed change vs the row's own base, paired by seed (n = "
                     f"seeds with both runs, of all seeds either side has); {interval}"
                     f"{pct}% paired t-interval over seeds (Student t, n − 1 degrees of "
                     "freedom, as for the means); † = the interval excludes 0.")
    better = "best" if spec.higher_is_better else "best (lowest)"
    notes.append(f"Bold: {better} per column within each block (absolute and delta rows "
                 "separately). — = no usable run (cell states in parentheses).")
    if stopped:
        notes.append(stopped)
    return tuple(notes)


def _run_averages(frame: pd.DataFrame, spec: TableSpec, values: np.ndarray) -> np.ndarray:
    """Each run's mean over the columns its block reports (blocks may be evaluated on
    different benchmarks); NaN when it lacks one of them."""
    keys = ([hashable_value(v) for v in frame[axis_column(spec.blocks)]]
            if spec.blocks else [None] * len(frame))
    out = np.full(len(frame), np.nan)
    for key in dict.fromkeys(keys):
        rows = np.array([k == key for k in keys], dtype=bool)
        present = np.isfinite(values[rows]).any(axis=0)
        if present.any():
            out[rows] = values[rows][:, present].mean(axis=1)
    return out


def build_table(frame: pd.DataFrame, spec: TableSpec) -> Table:
    """The table ``spec`` describes over the results frame ``frame``."""
    metrics = validate(frame, spec)
    frame = _filter(frame, spec).reset_index(drop=True)
    _check_unplaced(frame, spec)
    raw = frame[[f"metric.{m}" for m, _ in metrics]].to_numpy(dtype=float)
    factor = _scale_factor(raw, spec.scale)
    values = raw * factor
    headers = [h for _, h in metrics]
    if spec.average:
        values = np.column_stack([values, _run_averages(frame, spec, values)])
        headers.append(AVERAGE)
    n_cols = len(headers)
    label_axes = list(spec.label_axes)
    delta = spec.delta
    delta_axis = delta.axis if delta else ""
    # Without row axes, the delta axis labels the rows itself (its base value, then + ...).
    header_axes = label_axes or ([delta_axis] if delta else [])
    row_axes = [*([spec.blocks] if spec.blocks else []), *label_axes]
    combined = frame["sweep"].nunique() > 1
    # Several sweeps: a source component splits the rows its settings_diff keeps apart.
    sources = (provenance.source_keys(frame, row_axes) if combined
               else [provenance.POOLED] * len(frame))
    key_cols = [[hashable_value(v) for v in frame[axis_column(a)]] for a in row_axes]
    key_cols.append(sources)
    if delta:
        key_cols.append([hashable_value(v) for v in frame[axis_column(delta_axis)]])
    groups = _groups(frame, spec, key_cols, values)
    # Layout in order of first appearance: block -> row label (+ source) -> delta values.
    layout: dict[Any, dict[tuple[Any, ...], list[Any]]] = {}
    for key in groups:
        block = key[0] if spec.blocks else None
        rest = key[1:] if spec.blocks else key
        split = len(label_axes) + 1
        layout.setdefault(block, {}).setdefault(rest[:split], []).extend(rest[split:])
    blocks = []
    marks = _Marks()
    for block, by_label in layout.items():
        prefix: tuple[Any, ...] = () if block is None else (block,)
        rows: list[TableRow] = []
        for label_key, delta_values in by_label.items():
            source = label_key[-1]
            labels: tuple[Label, ...] = tuple(_label(v) for v in label_key[:-1])
            treatments: list[Any] = []
            if delta is None:
                base = groups[(*prefix, *label_key)]
            else:
                base_values = [v for v in delta_values if value_matches(v, delta.base)]
                treatments = [v for v in delta_values if not value_matches(v, delta.base)]
                base = groups[(*prefix, *label_key, base_values[0])] if base_values else _EMPTY
                if not label_axes:
                    labels = (_label(base_values[0]) if base_values else delta.base,)
            where = " · ".join(str(x) for x in (*prefix, *labels) if x != "")
            rows.append(marks.add(TableRow(
                labels + _sweep(combined, base, source), "absolute", base.n_text(),
                _absolute_cells(base, spec, n_cols)), where, numerics.note(base.keys)))
            for value in treatments:
                treat = groups[(*prefix, *label_key, value)]
                label = delta_label(delta_axis, value, only_treatment=len(treatments) == 1)
                cells, n_text, note, differ = _delta_cells(base, treat, spec, n_cols, label)
                blank: tuple[Label, ...] = ("",) * (len(header_axes) - 1)
                row = TableRow((label, *blank, *_sweep(combined, treat, source, base)), "delta",
                               n_text, cells)
                row = marks.add(row, f"{where}, {label}", note, compared.MARK)
                rows.append(marks.add(row, f"{where}, {label}", differ))
        title = None if block is None else display_value(block)
        blocks.append(TableBlock(title, tuple(_embolden(rows, spec))))
    partial = any(c.partial for b in blocks for r in b.rows for c in r.cells)
    if spec.strict:
        numerics.refuse(marks.differing, "--strict")
    notes = (f"Metric: {', '.join(metric_globs(frame, spec))} (a column per name it matches).",
             *_notes(spec, factor, delta is not None, partial, _stopped_note(frame)))
    if any(f.startswith(compared.MARK) for f in marks.footnotes):
        notes += (compared.EXPLANATION,)
    if marks.differing:
        notes += (numerics.EXPLANATION,)
    notes += tuple(marks.footnotes)
    headers_out = tuple(display_axis(a) for a in header_axes)
    if combined:
        notes += provenance.notes(any(s != provenance.POOLED for s in sources))
        headers_out += (provenance.SWEEP_HEADER,)
    return Table(label_headers=headers_out, columns=tuple(headers), blocks=tuple(blocks),
                 notes=notes, digits=spec.digits, show_ci=spec.show_ci)


@dataclass
class _Marks:
    """The table's footnotes, numbered in order across both kinds (``§1``, ``‡2``)."""

    footnotes: list[str] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)  # ``row: note`` of each ‡ mark

    def add(self, row: TableRow, where: str, note: str | None,
            symbol: str = numerics.MARK) -> TableRow:
        """``row`` with a footnote marker for ``note`` (unchanged when ``None``)."""
        if note is None:
            return row
        marker = f"{symbol}{len(self.footnotes) + 1}"
        self.footnotes.append(f"{marker} {where}: {note}.")
        if symbol == numerics.MARK:
            self.differing.append(f"{where}: {note}")
        return replace(row, marker=" ".join(filter(None, (row.marker, marker))),
                       note="; ".join(filter(None, (row.note, note))))


def _sweep(combined: bool, group: _Group, source: str, base: _Group = _EMPTY) -> tuple[Label, ...]:
    """The row's ``Sweep`` label (none for a table of one sweep)."""
    if not combined:
        return ()
    # A delta row of a point run twice: its base's settings name the difference too.
    settings = group.settings or base.settings
    return (provenance.sweep_label(group.sweeps, source, settings, base.sweeps),)


def _label(value: Any) -> Label:
    return value if isinstance(value, bool) else display_value(value)
