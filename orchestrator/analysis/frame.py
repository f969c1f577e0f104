"""The results frame: one row per cell of a sweep (seeds are an axis, so one row per seed).

Columns, in order: ``sweep``, ``cell_id``, ``state`` (registry state: ``succeeded``,
``failed``, ``running``, ``pending``, ...); ``axis.<name>``, the cell's value on every axis, in
the order the axes first appear; ``metric.<name>``, final metrics
(``metric.eval/arith-val/mean@8``), ``NaN`` where a cell has none; ``run_dir``,
``mlflow_run_id`` (``None`` when unknown); ``stop_reason``, why a stopping rule ended the cell
early (``plateau at step 340 (...)``), else ``None``: a stopped cell that ``succeeded`` is
finished, its numbers count; ``step``, the last step the cell reported (where it ended, for a
finished cell), and ``total_steps``, the length it was set to run (``None`` when unknown);
``numerics``, a short name of what computed the cell's numbers (backend and its numerics
version, library versions, CPU kernel set, GPU: :func:`orchestrator.runs.provenance.label`),
then ``prov.<section>.<field>``, everything its latest attempt recorded about the code and
the machine that made it (``prov.code.commit``, ``prov.numerics.torch``,
``prov.machine.host``; :mod:`orchestrator.runs.provenance`), ``None`` where not recorded.

A frame of several sweeps (:func:`orchestrator.analysis.combined.results_of`) has one more
column, ``settings_diff``: for a cell whose axes also ran in another of the sweeps, what
differs in its settings (``max_steps=3``, or ``same settings``), else ``None``.

Everything else in analysis (tables, plots, the report) consumes this frame, so it can be
built from any source: the registry, bare run folders, or a synthetic list in a test.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.runs import provenance

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

AXIS_PREFIX = "axis."
METRIC_PREFIX = "metric."
ID_COLUMNS: tuple[str, ...] = ("sweep", "cell_id", "state")
LOCATION_COLUMNS: tuple[str, ...] = ("run_dir", "mlflow_run_id")
STOP_COLUMN = "stop_reason"
STEP_COLUMNS: tuple[str, ...] = ("step", "total_steps")
NUMERICS_COLUMN = "numerics"
PROVENANCE_PREFIX = "prov."
DIFF_COLUMN = "settings_diff"
SUCCEEDED = "succeeded"


@dataclass(frozen=True)
class CellResult:
    """What analysis needs to know about one cell, whatever source it came from."""

    sweep: str
    cell_id: str
    state: str
    axes: Mapping[str, Any] = field(default_factory=dict)
    final_metrics: Mapping[str, float] = field(default_factory=dict)
    run_dir: str | None = None
    mlflow_run_id: str | None = None
    stop_reason: str | None = None
    step: int | None = None
    total_steps: int | None = None
    #: The cell's settings (not a frame column: what tells two sweeps' cells apart).
    settings: Mapping[str, Any] | None = field(default=None, compare=False)
    #: What made the cell's numbers (:mod:`orchestrator.runs.provenance`), if recorded.
    provenance: Mapping[str, Any] | None = field(default=None, compare=False)


def axis_column(name: str) -> str:
    """The frame column of axis ``name``."""
    return AXIS_PREFIX + name


def metric_column(name: str) -> str:
    """The frame column of final metric ``name``."""
    return METRIC_PREFIX + name


def axis_names(frame: pd.DataFrame) -> list[str]:
    """The sweep's axes, in column order, without the ``axis.`` prefix."""
    return [c[len(AXIS_PREFIX) :] for c in frame.columns if c.startswith(AXIS_PREFIX)]


def metric_names(frame: pd.DataFrame) -> list[str]:
    """The final metrics present in the frame, without the ``metric.`` prefix."""
    return [c[len(METRIC_PREFIX) :] for c in frame.columns if c.startswith(METRIC_PREFIX)]


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def frame_from_results(cells: Iterable[CellResult]) -> pd.DataFrame:
    """Build the results frame from cell results (any order of axes and metrics)."""
    import pandas as pd

    cells = list(cells)
    # Axes and metrics keep the order in which they first appear (the spec's and the
    # evaluator's order), which is the order tables show them in.
    axes = list(dict.fromkeys(a for c in cells for a in c.axes))
    metrics = list(dict.fromkeys(m for c in cells for m in c.final_metrics))
    # Per cell, not per id: a point that ran in two sweeps has one id and two provenances.
    made = [provenance.flat(c.provenance) for c in cells]
    recorded = list(dict.fromkeys(name for flat in made for name in flat))
    rows = [{"sweep": c.sweep, "cell_id": c.cell_id, "state": c.state,
             **{axis_column(a): c.axes.get(a) for a in axes},
             **{metric_column(m): _as_float(c.final_metrics.get(m, math.nan)) for m in metrics},
             "run_dir": c.run_dir, "mlflow_run_id": c.mlflow_run_id, STOP_COLUMN: c.stop_reason,
             "step": c.step, "total_steps": c.total_steps,
             NUMERICS_COLUMN: (provenance.label(provenance.numerics_key(c.provenance))
                               if c.provenance else None),
             **{PROVENANCE_PREFIX + n: flat.get(n) for n in recorded}}
            for c, flat in zip(cells, made, strict=True)]
    columns = [*ID_COLUMNS, *map(axis_column, axes), *map(metric_column, metrics),
               *LOCATION_COLUMNS, STOP_COLUMN, *STEP_COLUMNS, NUMERICS_COLUMN,
               *(PROVENANCE_PREFIX + n for n in recorded)]
    # Object dtype first, so axis values keep their Python types (bool, int, str, None)
    # rather than being coerced to floats and NaN.
    frame = pd.DataFrame(rows, columns=columns, dtype=object)
    for name in metrics:
        frame[metric_column(name)] = frame[metric_column(name)].astype(float)
    return frame


def axes_text(record: Mapping[str, Any], axes: Sequence[str]) -> str:
    """A frame record's values on ``axes``: ``baseline=grpo, seed=1``."""
    return ", ".join(f"{a}={record[axis_column(a)]}" for a in axes)


def varying_axes(frame: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """Axes that take more than one value in ``frame`` (other than those excluded)."""
    return [name for name in axis_names(frame) if name not in exclude
            and len({hashable_value(v) for v in frame[axis_column(name)]}) > 1]


def hashable_value(value: Any) -> Any:
    """``value`` itself when hashable, else its ``repr`` (list-valued axes such as clip pairs)."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def frame_text(frame: pd.DataFrame, fmt: str) -> str:
    """The frame as CSV, or (``json``) as JSON records: one per cell, axis values keeping
    their types, NaN as ``null``, ±inf as ``"inf"``/``"-inf"`` (as a spec writes it)."""
    if fmt == "csv":
        return str(frame.to_csv(index=False))
    records = [{str(k): _json_value(v) for k, v in record.items()}
               for record in frame.to_dict("records")]
    return json.dumps(records, indent=2, allow_nan=False) + "\n"


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        return _json_value(value.item())
    return value


def parquet_writer(frame: pd.DataFrame) -> Callable[[Path], None]:
    """What writes the frame as Parquet to a path it is given. Parquet needs one type per
    column: axis columns of mixed types become strings."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object:
            inferred = frame[column].infer_objects()
            mixed = inferred.dtype == object and len({type(v) for v in inferred.dropna()}) > 1
            frame[column] = (inferred.astype(str).where(inferred.notna(), None) if mixed
                             else inferred)
    return lambda path: frame.to_parquet(path, index=False)
