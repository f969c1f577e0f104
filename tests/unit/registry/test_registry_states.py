"""The transition table: every listed edge passes, everything else is refused."""

from __future__ import annotations

import itertools

import pytest

from orchestrator.registry.states import (
    TERMINAL_STATES,
    TRANSITIONS,
    CellState,
    IllegalTransition,
    check_transition,
)


def test_every_state_has_an_entry() -> None:
    assert set(TRANSITIONS) == set(CellState)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(CellState, CellState)))
def test_edges_follow_the_table(source: CellState, target: CellState) -> None:
    if target in TRANSITIONS[source]:
        assert check_transition([source], target) == (frozenset({source}), target)
    else:
        with pytest.raises(IllegalTransition, match=f"{source.value} -> {target.value}"):
            check_transition([source], target)


def test_the_documented_life_is_allowed() -> None:
    path = [
        CellState.PENDING,
        CellState.QUEUED,
        CellState.RUNNING,
        CellState.SUCCEEDED,
        CellState.PENDING,
    ]
    for a, b in itertools.pairwise(path):
        check_transition([a], b)
    for terminal in TERMINAL_STATES:
        check_transition([CellState.RUNNING], terminal)
        check_transition([terminal], CellState.PENDING)


def test_running_cannot_go_back_to_pending_or_skip_queue() -> None:
    with pytest.raises(IllegalTransition):
        check_transition(["running"], "pending")
    with pytest.raises(IllegalTransition):
        check_transition(["pending"], "running")


def test_one_bad_source_spoils_the_set() -> None:
    with pytest.raises(IllegalTransition, match="succeeded"):
        check_transition(["failed", "succeeded"], "queued")


def test_no_expected_state_is_an_error() -> None:
    with pytest.raises(IllegalTransition):
        check_transition([], "queued")


def test_unknown_state_names_fail() -> None:
    with pytest.raises(ValueError):
        check_transition(["pending"], "done")
