"""The step at which a delta row compares its pairs, when a stopping rule ended some early.

A delta is honest when both runs of every pair trained equally long. When every run ran its
full length, tables say nothing more; when any stopped early, the delta row gets a marker
(``§1``) and a footnote: ``compared at step 120, stopped early`` when both runs of every pair
ended at the same step, else the pairs whose steps differ (``steps differ (base vs + RB):
120 vs 150 (seed 1)``). The steps are the registry's (or the run folder's): this module only
renders what stopping did, it decides nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

MARK = "§"


@dataclass(frozen=True)
class RunLength:
    """Where one run ended and whether that was before its full length."""

    step: int | None
    early: bool


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):  # None, NaN
        return None


def run_length(stop_reason: Any, step: Any, total_steps: Any) -> RunLength:
    """A run's length from its frame columns: early when a rule stopped it or it ended
    short of ``total_steps``."""
    at, total = _int_or_none(step), _int_or_none(total_steps)
    stopped = isinstance(stop_reason, str) and bool(stop_reason)
    return RunLength(at, stopped or (at is not None and total is not None and at < total))


def _step(value: int | None) -> str:
    return "?" if value is None else str(value)


def _seed(seed: Hashable) -> str:
    return "" if seed is None else f" (seed {seed})"


def compare_note(pairs: Sequence[tuple[Hashable, RunLength, RunLength]],
                 treatment: str) -> str | None:
    """The footnote of a delta row over ``(seed, base run, treatment run)`` pairs, or
    ``None`` when every run of every pair ran its full length."""
    if not any(b.early or t.early for _, b, t in pairs):
        return None
    unequal = [(s, b, t) for s, b, t in pairs if b.step != t.step or b.step is None]
    if unequal:
        listed = "; ".join(f"{_step(b.step)} vs {_step(t.step)}{_seed(s)}" for s, b, t in unequal)
        return f"steps differ (base vs {treatment}): {listed}"
    steps = list(dict.fromkeys(b.step for _, b, _ in pairs))
    if len(steps) == 1:
        return f"compared at step {_step(steps[0])}, stopped early"
    listed = ", ".join(f"{_step(b.step)}{_seed(s)}" for s, b, _ in pairs)
    return f"compared at steps {listed} (both runs of each pair alike), stopped early"


# The note that introduces the markers.
EXPLANATION = (f"{MARK}: a stopping rule ended some runs of this delta before their full length; "
               "the footnote gives the step at which each pair was compared.")
