"""The life of a cell: its states and the only transitions allowed between them.

``TRANSITIONS`` is the single source of truth; :class:`~orchestrator.registry.Registry`
refuses anything it does not list.

::

    pending ──► queued ──► running ──► succeeded | failed | cancelled
       ▲          │  │                      │         │         │
       │          │  └──► failed | cancelled (launch error / cancel before start)
       └──────────┴───────────────────────────────────┴─────────┘  (requeue, retry, rerun)
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from orchestrator.errors import KappaError


class CellState(StrEnum):
    """Where a cell is in its life."""

    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class AttemptState(StrEnum):
    """How one launch of a cell ended (``running`` while it has not)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATES = frozenset({CellState.SUCCEEDED, CellState.FAILED, CellState.CANCELLED})

# Why each edge exists:
#   pending->queued      the scheduler claims the cell
#   pending->cancelled   cancelled before it was ever claimed
#   queued->running      the launch started (an attempt begins)
#   queued->pending      a scheduler restarting hands back claims it never launched
#   queued->failed       the launch itself failed (bad executor, no such binary)
#   queued->cancelled    cancelled after the claim, before the launch
#   running->terminal    the attempt ended
#   failed|cancelled->pending   resume / retry
#   succeeded->pending   an explicit rerun
TRANSITIONS: dict[CellState, frozenset[CellState]] = {
    CellState.PENDING: frozenset({CellState.QUEUED, CellState.CANCELLED}),
    CellState.QUEUED: frozenset({CellState.RUNNING, CellState.PENDING, CellState.FAILED,
                                 CellState.CANCELLED}),
    CellState.RUNNING: frozenset(TERMINAL_STATES),
    CellState.SUCCEEDED: frozenset({CellState.PENDING}),
    CellState.FAILED: frozenset({CellState.PENDING}),
    CellState.CANCELLED: frozenset({CellState.PENDING}),
}


class IllegalTransition(KappaError):
    """A programming error: a state change that ``TRANSITIONS`` forbids."""


def check_transition(expected: Iterable[CellState | str],
                     new: CellState | str) -> tuple[frozenset[CellState], CellState]:
    """``expected``/``new`` normalised; :class:`IllegalTransition` unless every edge is allowed."""
    target = CellState(new)
    sources = frozenset(CellState(s) for s in expected)
    if not sources:
        raise IllegalTransition(f"transition to {target.value!r} needs at least one expected state")
    bad = sorted(s.value for s in sources if target not in TRANSITIONS[s])
    if bad:
        allowed = "; ".join(f"{s.value} -> {'|'.join(sorted(t.value for t in TRANSITIONS[s]))}"
                            for s in CellState if s.value in bad)
        raise IllegalTransition(f"illegal transition {'|'.join(bad)} -> {target.value}; "
                                f"allowed from {allowed}")
    return sources, target
