"""Several sweeps read as one results frame (``kappa table A B``, ``report``, ``export``).

Cells are matched by their axes: a follow-up sweep with more seeds, or a new variant run
against last week's baselines, lands in the same rows as the first sweep's cells. An axis
one sweep lacks takes the value the cell's settings give it (a sweep that never varied
``reward_budget`` still ran with one), else ``None``. A seed is a replicate wherever it is
set: a ``seed`` set in ``base`` counts as the seed axis, so two sweeps that each set one
seed pool like the seeds of one axis.

Cells of the same axes (the seed aside) in several sweeps are pooled only when their
settings agree apart from the seed and no seed ran twice; otherwise they are never pooled
silently. The frame's ``settings_diff`` column names what differs in their settings
(``max_steps=3``, or ``same settings`` for a repeated seed), and tables show such rows once
per sweep (:mod:`orchestrator.analysis.tables.provenance`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from orchestrator import paths
from orchestrator.analysis.frame import DIFF_COLUMN, CellResult, frame_from_results, hashable_value
from orchestrator.analysis.sources import results, sweep_cells
from orchestrator.errors import Problem, UserInputError
from orchestrator.tracking.naming import flatten

if TYPE_CHECKING:
    import pandas as pd

SEED = "seed"  # the setting, and axis, of replicate seeds
SAME_SETTINGS = "same settings"
UNKNOWN_SETTINGS = "settings unknown"
MAX_NAMED = 3  # differing settings named per cell; the rest are counted


def _with_all_axes(cells: list[CellResult]) -> list[CellResult]:
    """Every cell with every sweep's axes (and ``seed`` wherever a cell's settings set it): a
    missing one from its settings, else ``None``."""
    names = list(dict.fromkeys(a for c in cells for a in c.axes))
    if SEED not in names and any(SEED in (c.settings or {}) for c in cells):
        names.append(SEED)
    out = []
    for cell in cells:
        missing = [a for a in names if a not in cell.axes]
        if missing:
            flat = dict(flatten(cell.settings or {}))
            cell = replace(cell, axes={**cell.axes, **{a: flat.get(a) for a in missing}})
        out.append(cell)
    return out


def value_text(value: Any) -> str:
    """A setting or axis value as a spec writes it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _seed(cell: CellResult) -> str:
    return repr(hashable_value(cell.axes.get(SEED)))


def settings_differences(cells: Sequence[CellResult]) -> dict[tuple[str, str], str]:
    """``(sweep, cell_id) -> text`` for the cells not to be pooled across sweeps: cells of the
    same axes (the seed aside) in several sweeps whose settings differ beyond the seed (what
    differs, their own values), or that repeat a seed of another sweep (``same settings``;
    ``settings unknown`` when a sweep is known only from its run folders)."""
    by_point: dict[tuple[Any, ...], list[CellResult]] = {}
    for cell in cells:
        key = tuple(sorted((a, repr(hashable_value(v))) for a, v in cell.axes.items()
                           if a != SEED))
        by_point.setdefault(key, []).append(cell)
    out: dict[tuple[str, str], str] = {}
    for group in by_point.values():
        if len({c.sweep for c in group}) < 2:
            continue
        sweeps_of: dict[str, set[str]] = {}  # seed -> the sweeps that ran it
        for cell in group:
            sweeps_of.setdefault(_seed(cell), set()).add(cell.sweep)
        repeated = [c for c in group if len(sweeps_of[_seed(c)]) > 1]
        if any(c.settings is None for c in group):  # judged by the seeds alone
            out.update({(c.sweep, c.cell_id): UNKNOWN_SETTINGS for c in repeated})
            continue
        flats = [{k: v for k, v in flatten(c.settings or {}) if k != SEED} for c in group]
        differ = [k for k in sorted({k for f in flats for k in f})
                  if len({repr(f.get(k)) for f in flats}) > 1]
        out.update({(c.sweep, c.cell_id): SAME_SETTINGS for c in repeated})
        for cell, flat in zip(group, flats, strict=True) if differ else ():
            named = [f"{k}={value_text(flat.get(k))}" for k in differ[:MAX_NAMED]]
            more = len(differ) - MAX_NAMED
            out[(cell.sweep, cell.cell_id)] = ", ".join(named) + (
                f" and {more} more" if more > 0 else "")
    return out


def check_sweep_names(sweeps: Sequence[str]) -> list[str]:
    """The names, each once, in the order given; ``UserInputError`` for none or a repeat."""
    if not sweeps:
        raise UserInputError("no sweep named", [Problem("SWEEP", "name at least one sweep")])
    repeated = sorted({s for s in sweeps if list(sweeps).count(s) > 1})
    if repeated:
        raise UserInputError("a sweep is named twice", [Problem(
            "SWEEP", "each sweep can be read once", found=", ".join(repeated),
            fix="name each sweep once")])
    return [paths.check_name(s) for s in sweeps]


def results_of(sweeps: Sequence[str], registry_url: str | None = None,
               mlflow_uri: str | None = None) -> pd.DataFrame:
    """One results frame of ``sweeps`` (module docstring); one sweep: exactly
    :func:`orchestrator.analysis.sources.results`."""
    names = check_sweep_names(sweeps)
    if len(names) == 1:
        return results(names[0], registry_url, mlflow_uri)
    cells = _with_all_axes([c for s in names for c in sweep_cells(s, registry_url, mlflow_uri)])
    diffs = settings_differences(cells)
    frame = frame_from_results(cells)
    frame[DIFF_COLUMN] = [diffs.get((c.sweep, c.cell_id)) for c in cells]
    return frame
