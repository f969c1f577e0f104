"""The life of a cell: its states and the only transitions allowed between them
(``TRANSITIONS``, the single source of truth: the registry refuses any other)."""

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

TRANSITIONS: dict[CellState, frozenset[CellState]] = {
    # the scheduler claims the cell; or it is cancelled before it ever was
    CellState.PENDING: frozenset({CellState.QUEUED, CellState.CANCELLED}),
    # the launch starts an attempt; a restarting scheduler hands back a claim it never
    # launched; the launch itself failed (bad executor, no such binary); cancelled before it
    CellState.QUEUED: frozenset({CellState.RUNNING, CellState.PENDING, CellState.FAILED,
                                 CellState.CANCELLED}),
    CellState.RUNNING: frozenset(TERMINAL_STATES),  # the attempt ended
    # an explicit rerun; resume or retry
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
    if bad := sorted(s.value for s in sources if target not in TRANSITIONS[s]):
        allowed = "; ".join(f"{s.value} -> {'|'.join(sorted(t.value for t in TRANSITIONS[s]))}"
                            for s in CellState if s.value in bad)
        raise IllegalTransition(f"illegal transition {'|'.join(bad)} -> {target.value}; "
                                f"allowed from {allowed}")
    return sources, target
