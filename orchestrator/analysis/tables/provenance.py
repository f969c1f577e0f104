"""Where a table's numbers come from when its frame holds several sweeps.

Such a table gets a ``Sweep`` label column: the sweep(s) of each row's runs (for a delta row,
its treatment runs, then ``vs`` its base runs' sweeps when they differ). Rows pool the sweeps'
cells (more seeds, a new variant against old baselines) unless the frame's ``settings_diff``
keeps some apart (:func:`orchestrator.analysis.combined.settings_differences`: their settings
differ beyond the seed, or a seed ran twice): then that row is shown once per sweep, named
with what differs in that sweep's settings, never averaged together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.analysis.frame import DIFF_COLUMN, axis_column, axis_names, hashable_value

if TYPE_CHECKING:
    import pandas as pd

SWEEP_HEADER = "Sweep"
POOLED = ""  # the source key of rows whose sweeps are pooled


def source_keys(frame: pd.DataFrame, row_axes: Sequence[str]) -> list[str]:
    """Per cell: ``POOLED``, or its sweep when its row (``row_axes``) holds a cell that
    must not be averaged with other sweeps' (a ``settings_diff``)."""
    present = set(axis_names(frame))

    def column(axis: str) -> list[Any]:
        return ([hashable_value(v) for v in frame[axis_column(axis)]] if axis in present
                else [None] * len(frame))

    rows = list(zip(*(column(a) for a in row_axes), strict=True)) or [()] * len(frame)
    diffs = frame[DIFF_COLUMN] if DIFF_COLUMN in frame.columns else [None] * len(frame)
    split = {row for row, diff in zip(rows, diffs, strict=True) if isinstance(diff, str)}
    sweeps = [str(s) for s in frame["sweep"]]
    return [sweep if row in split else POOLED for row, sweep in zip(rows, sweeps, strict=True)]


def settings_texts(frame: pd.DataFrame, rows: Sequence[int]) -> tuple[str, ...]:
    """The ``settings_diff`` texts of the frame's ``rows``, each once."""
    if DIFF_COLUMN not in frame.columns:
        return ()
    texts = [frame[DIFF_COLUMN].iloc[i] for i in rows]
    return tuple(dict.fromkeys(t for t in texts if isinstance(t, str) and t))


def sweep_label(sweeps: Sequence[str], source: str, settings: Sequence[str],
                base_sweeps: Sequence[str] = ()) -> str:
    """The ``Sweep`` column of a row."""
    if source != POOLED:
        return f"{source} ({'; '.join(settings)})" if settings else source
    text = ", ".join(sweeps) or "—"
    if base_sweeps and list(base_sweeps) != list(sweeps):
        text += f" vs {', '.join(base_sweeps)}"
    return text


def notes(split: bool) -> tuple[str, ...]:
    """The notes of a table over several sweeps."""
    out = [f"{SWEEP_HEADER}: the sweep(s) each row's runs come from (a delta row: its "
           "treatment runs, then 'vs' its base runs' sweeps when they differ); rows pool "
           "the sweeps' cells by their axes."]
    if split:
        out.append("A sweep name with settings in parentheses: cells of the same axes ran "
                   "in more than one sweep with settings that differ beyond the seed, or "
                   "with the same seed; each sweep's runs are shown on their own rows, "
                   "never averaged together; the parentheses say what differs in that "
                   "sweep's settings.")
    return tuple(out)
