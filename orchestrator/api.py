"""kappa's results as pandas objects, for notebooks and scripts (docs/python-api.md).

Every function reads what ``kappa table``, ``report`` and ``export`` read: the registry when
it knows the sweep, else the sweep's run folders, with final metrics or curves the run
folder lacks taken from MLflow. ``registry`` and ``mlflow`` default to the stores under
``KAPPA_HOME`` (as the CLI's ``--registry`` and ``--mlflow``). Nothing here writes.

Several sweeps are read as one (:mod:`orchestrator.analysis.combined`): cells are matched
by their axes, the ``sweep`` column says where each row comes from, and a point that ran in
two sweeps keeps one row per sweep with ``settings_diff`` naming what differs.
"""

from __future__ import annotations

import fnmatch
import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.analysis.tables import TableSpec
    from orchestrator.sweeps.status import SweepStatus

Sweeps = str | Sequence[str]


def _listed(names: str | Sequence[str]) -> list[str]:
    """One name (a sweep, a glob) or several, as a list."""
    return [names] if isinstance(names, str) else list(names)


def sweeps(registry: str | None = None) -> pd.DataFrame:
    """One row per sweep in the registry: ``name``, ``backend``, ``created_at``,
    ``updated_at``, ``cells`` and a count per cell state (``succeeded``, ``failed``, ...).

    >>> api.sweeps().set_index("name")["succeeded"]
    """
    import pandas as pd

    from orchestrator.sweeps.status import STATES
    from orchestrator.sweeps.stores import RegistryMissing, Stores
    from orchestrator.sweeps.sweep import Sweep

    columns = ["name", "backend", "created_at", "updated_at", "cells", *STATES]
    try:
        opened = Stores(registry).open_registry(create=False)
    except RegistryMissing:
        return pd.DataFrame(columns=columns)
    rows = []
    with opened as reg:
        for handle in Sweep.every(reg):
            status = handle.active_status()
            handle.close()
            rows.append({"name": status.sweep, "backend": status.backend,
                         "created_at": handle.record.created_at,
                         "updated_at": status.updated_at, "cells": status.total,
                         **status.counts})
    return pd.DataFrame(rows, columns=columns)


def status(sweep: str, registry: str | None = None) -> SweepStatus:
    """The sweep's status, as ``kappa status SWEEP`` shows it (``.as_json()`` is what
    ``--json`` prints): counts, per-cell progress and stop reasons, hours used, projected
    and saved (per comparison group too), who drives it, overrides, studies and where its
    notifications go (masked). A frozen value: call again to refresh.

    >>> s = api.status("toy-demo")
    >>> s.counts, s.hours.used, [c.state_text for c in s.cells]
    """
    from orchestrator.sweeps.stores import Stores
    from orchestrator.sweeps.sweep import Sweep

    with Stores(registry).open_registry(create=False) as reg:
        return Sweep.open(reg, sweep).status()


def cells(sweeps: Sweeps, registry: str | None = None,
          mlflow: str | None = None) -> pd.DataFrame:
    """The results frame: one row per cell (seeds are an axis), as ``kappa export`` writes it.

    Columns: ``sweep``, ``cell_id``, ``state``, ``axis.<name>`` per axis, ``metric.<name>``
    per final metric, ``run_dir``, ``mlflow_run_id``, ``stop_reason``, ``step`` (where the
    cell ended), ``total_steps``, ``numerics`` (what computed its numbers) and
    ``prov.<section>.<field>`` (the code and machine that made them); of several sweeps,
    also ``settings_diff``. An axis column, ``step`` and ``total_steps`` have the dtype
    their values share (``Int64``, ``boolean``, ``string``, ...; nullable: a cell that never
    ran has no step); only an axis of mixed types is ``object``.

    >>> frame = api.cells(["toy-demo", "toy-demo-more-seeds"])
    >>> frame.groupby("axis.baseline")["state"].value_counts()
    """
    frame = _frame(sweeps, registry, mlflow)
    for column in frame.columns:
        if (column.startswith("axis.") or column in ("step", "total_steps")) and \
                frame[column].dtype == object:
            frame[column] = frame[column].convert_dtypes()
    return frame


def _frame(sweeps: Sweeps, registry: str | None, mlflow: str | None) -> pd.DataFrame:
    """The results frame as ``kappa export`` and ``kappa table`` read it (untyped)."""
    from orchestrator.analysis.combined import results_of

    return results_of(_listed(sweeps), registry, mlflow)


def final_metrics(sweeps: Sweeps, metrics: str | Sequence[str] = "*",
                  registry: str | None = None, mlflow: str | None = None) -> pd.DataFrame:
    """Final metrics of every cell: ``sweep``, ``cell_id``, ``state``, the ``axis.*``
    columns and the ``metric.*`` columns whose names match the ``metrics`` glob(s).

    >>> m = api.final_metrics("toy-demo", "eval/*/mean@8")
    >>> m.groupby(["axis.baseline", "axis.reward_budget"]).mean(numeric_only=True)
    """
    from orchestrator.analysis.frame import METRIC_PREFIX, metric_names

    frame = cells(sweeps, registry, mlflow)
    globs = _listed(metrics)
    wanted = [METRIC_PREFIX + m for m in metric_names(frame)
              if any(fnmatch.fnmatchcase(m, g) for g in globs)]
    axes = [c for c in frame.columns if c.startswith("axis.")]
    return frame[["sweep", "cell_id", "state", *axes, *wanted]].reset_index(drop=True)


def histories(sweeps: Sweeps, metrics: str | Sequence[str] = "*",
              registry: str | None = None, mlflow: str | None = None) -> pd.DataFrame:
    """Per-step metric histories, long form: one row per (cell, step, metric) with
    ``sweep``, ``cell_id``, ``step``, ``metric``, ``value`` and the cell's ``axis.*``
    columns; from each run folder's ``metrics.jsonl``, else from its MLflow run.

    >>> h = api.histories("toy-demo", "val-core/*/acc/mean@1")
    >>> h.pivot_table(index="step", columns="axis.reward_budget", values="value")
    """
    from orchestrator import paths
    from orchestrator.analysis.curves import curve_key, load_curves

    frame = _frame(sweeps, registry, mlflow)
    curves = load_curves(frame, _listed(metrics), paths.readable_mlflow_uri(mlflow))
    combined = frame["sweep"].nunique() > 1
    records = frame.to_dict("records")
    # The curves name a cell of several sweeps "<sweep>/<id>": give it its sweep and own id.
    sweep_of = {curve_key(r, combined): r["sweep"] for r in records}
    id_of = {curve_key(r, combined): r["cell_id"] for r in records}
    keys = curves["cell_id"]
    curves["cell_id"] = keys.map(id_of)
    curves.insert(0, "sweep", keys.map(sweep_of))
    return curves


def _table_spec(layout: Mapping[str, Any]) -> tuple[TableSpec, bool]:
    """``layout`` as ``kappa table``'s options read it (every problem a ``UserInputError``),
    and whether it places the axes itself (else the layout follows the sweep's axes)."""
    from orchestrator.analysis.tables import DeltaSpec
    from orchestrator.analysis.tables.spec import options_spec

    fields = dict(layout)
    rows, cross, delta = (fields.pop(key, None) for key in ("rows", "cross", "delta"))
    where = fields.pop("where", None) or {}
    spec = options_spec(
        rows if rows is None or isinstance(rows, str) else ",".join(rows),
        f"{delta.axis}={delta.base}" if isinstance(delta, DeltaSpec) else delta,
        cross if cross is None or isinstance(cross, str) else ",".join(cross),
        [f"{k}={v}" for k, v in where.items()] if isinstance(where, Mapping) else list(where),
        **fields)
    return spec, bool({"rows", "delta", "cross", "blocks"} & set(layout))


def table_text(sweeps: Sweeps, fmt: str = "markdown", registry: str | None = None,
               mlflow: str | None = None, **layout: Any) -> str:
    """The ablation table as ``kappa table`` prints it (``fmt``: markdown, latex, csv,
    html), notes included: one search sweep without ``metrics`` shows its best trial per
    study, a sweep that added seeds on demand says how each row was decided. ``layout``
    takes :class:`~orchestrator.analysis.tables.TableSpec`'s fields, as Python values or as
    the CLI writes them: ``rows="baseline"``, ``delta="reward_budget=false"``,
    ``cross="use_kl_loss,reward_budget"``, ``blocks``, ``metrics``,
    ``where={"model": "tiny"}``, ``seed_axis``, ``show_ci``, ... Without ``rows``,
    ``delta``, ``cross`` or ``blocks`` the layout follows the axes, as in the CLI.

    >>> print(api.table_text("toy-demo", delta="reward_budget=false"))
    """
    from orchestrator.analysis.report import table_text as kappa_table

    spec, placed = _table_spec(layout)
    return kappa_table(_listed(sweeps), spec, fmt, placed, registry, mlflow)


def table(sweeps: Sweeps, registry: str | None = None, mlflow: str | None = None,
          **layout: Any) -> pd.DataFrame:
    """The ablation table as numbers: one row per table row (``block``, its labels,
    ``base``, ``kind`` absolute or delta, ``n``) and per column the estimate, ``low``,
    ``high``, ``significant`` (``boolean``) and ``n``; ``compared`` where a stopping rule
    ended a delta's pairs early. ``base`` names a delta row's base row (its labels, joined by
    `` · ``: the absolute row above it); ``<NA>`` on absolute rows. ``layout`` as in
    :func:`table_text`.

    >>> t = api.table("toy-demo", metrics="eval/*/mean@8")
    >>> t[t["kind"] == "delta"][["Method", "base", "Average", "Average low", "Average high"]]
    """
    import pandas as pd

    from orchestrator.analysis.report import sweep_table
    from orchestrator.analysis.tables import render

    spec, placed = _table_spec(layout)
    text = render(sweep_table(_listed(sweeps), spec, placed, registry, mlflow), "csv")
    frame = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])
    frame["block"] = frame["block"].astype("string")
    for column in frame.columns[frame.columns.str.endswith(" significant")]:
        frame[column] = frame[column].astype("boolean")
    labels = list(frame.columns[1:frame.columns.get_loc("kind")])
    named = frame[labels].astype("string").fillna("").agg(
        lambda row: " · ".join(v for v in row if v), axis=1)
    # A delta row's base is the absolute row above it, in its block.
    base = named.where(frame["kind"] == "absolute").groupby(
        frame["block"].fillna("")).ffill()
    frame.insert(frame.columns.get_loc("kind"), "base",
                 base.where(frame["kind"] == "delta").astype("string"))
    return frame
