"""Whether the runs behind a row or a delta were computed by the same numerics.

A number pooled over seeds, or a delta between two arms, is only a comparison when every
run behind it was computed alike: the same backend numerics version, library versions
(torch, verl, vLLM, CUDA), CPU kernel set and GPU model (:func:`orchestrator.runs.
provenance.numerics_key`). When they differ the row gets a marker (``‡1``) and a footnote
naming the difference (``numerics differ: torch 2.13.0 vs 2.12.0``), the way ``§`` marks
pairs compared at different steps; ``--strict`` refuses such a table instead. Runs made
before kappa recorded provenance differ from runs that have it; a table whose runs all
lack it has no marks (nothing to compare: ``kappa plan`` lists such cells as stale).

The keys are read back from the frame's ``prov.numerics.*`` and ``prov.machine.*``
columns, so a frame from any source (registry, run folders, several sweeps) is checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from orchestrator.analysis.frame import PROVENANCE_PREFIX, SUCCEEDED
from orchestrator.errors import Problem, UserInputError
from orchestrator.runs import provenance

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.registry import CellRecord

MARK = "‡"
Key = Mapping[str, str]
_NUMERICS = f"{PROVENANCE_PREFIX}numerics."
_MACHINE = {f"{PROVENANCE_PREFIX}machine.{name}": name for name in ("cpu_capability", "gpu")}
# The note that introduces the markers.
EXPLANATION = (f"{MARK}: the runs behind this number were computed by different numerics "
               "(backend version, libraries, CPU kernels or GPU); the footnote names the "
               "difference. `--strict` refuses such a table.")


def run_keys(frame: pd.DataFrame) -> list[dict[str, str]]:
    """Each run's numerics key (empty: no provenance recorded), in frame order."""
    named = {c: c[len(_NUMERICS):] for c in frame.columns if c.startswith(_NUMERICS)}
    named |= {c: n for c, n in _MACHINE.items() if c in frame.columns}
    keys: list[dict[str, str]] = [{} for _ in range(len(frame))]
    for column, name in named.items():
        for i, value in enumerate(frame[column]):
            if isinstance(value, str):
                keys[i][name] = value
    return keys


def note(keys: Sequence[Key]) -> str | None:
    """The footnote of a row or delta over its runs' keys, or ``None`` when they agree
    (or none recorded any)."""
    if not any(keys):
        return None
    found = provenance.differences(list(keys))
    return f"numerics differ: {'; '.join(found)}" if found else None


def refuse(marked: Sequence[str], where: str) -> None:
    """``--strict``: refuse (exit 2) when any of ``marked`` (``row: note`` texts) exists."""
    if marked:
        raise UserInputError("runs computed by different numerics would be compared", [Problem(
            where, text, fix="rerun the stale cells (`kappa submit SPEC --rerun-stale`), or "
                             "drop --strict to see the table with the differences marked")
            for text in marked])


def check_runs(keys: Sequence[Key], where: str, strict: bool) -> str | None:
    """For outputs without rows (export, convergence, stop-check, a report): a note naming
    what differs among the finished runs' ``keys``, or ``None``; with ``strict``, refuse."""
    found = note(keys)
    if found is not None and strict:
        refuse([found], where)
    return found


def finished_keys(runs: pd.DataFrame | Sequence[CellRecord]) -> list[dict[str, str]]:
    """The numerics keys of the succeeded runs of a results frame or of registry cells."""
    if isinstance(runs, Sequence):
        return [provenance.numerics_key(c.provenance) for c in runs
                if c.state.value == SUCCEEDED]
    return [k for k, s in zip(run_keys(runs), runs["state"], strict=True) if s == SUCCEEDED]
