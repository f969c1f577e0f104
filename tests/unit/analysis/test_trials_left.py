"""A search sweep has ended only when its studies' work is done (each budget spent, or the
study stopped), whoever drives it: :func:`~orchestrator.analysis.studies.trials_left` and
the ``ended`` it feeds (:class:`~orchestrator.sweeps.status.SweepStatus`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from kit.cells import status_of

from orchestrator.analysis.studies import StudySummary, TrialSummary, trials_left
from orchestrator.registry.leases import Lease
from orchestrator.sweeps.status import Driver


def _study(states: str, budget: int = 3, error: str | None = None,
           name: str = "s[b=1]") -> StudySummary:
    """A study whose trials 0, 1, ... are in ``states`` (C complete, R running, F failed)."""
    full = {"C": "COMPLETE", "R": "RUNNING", "F": "FAIL"}
    return StudySummary(name, "maximize", "score", budget,
                        tuple(TrialSummary(n, full[s], None, {}) for n, s in enumerate(states)),
                        error)


def _cancelled(study: str, trial: int) -> Any:
    return SimpleNamespace(labels={"kappa.study": study, "kappa.trial": trial})


@pytest.mark.parametrize(("studies", "planned", "cancelled", "left"), [
    ([], 1, [], True),  # no study made yet: nothing recorded, the budget all left
    ([_study("CC")], 2, [], True),  # one study of the two planned not made yet
    ([_study("C")], 1, [], True),  # budget left
    ([_study("CCR")], 1, [], True),  # budget asked, a trial still to tell
    ([_study("CCF")], 1, [], False),  # budget spent
    ([_study("C", error="never logged score")], 1, [], False),  # stopped by its error
    ([_study("CR")], 1, [_cancelled("s[b=1]", 1)], False),  # stopped by a cancelled cell
    ([_study("CR")], 1, [_cancelled("s[b=2]", 0)], True),  # another study's cancel
    ([_study("CCC"), _study("C", name="s[b=2]")], 2, [], True),  # one of two has budget left
])
def test_trials_left_until_every_study_is_spent_or_stopped(
        studies: list[StudySummary], planned: int, cancelled: list[Any], left: bool) -> None:
    assert trials_left(studies, planned, cancelled) is left


def test_a_sweep_ends_when_its_work_is_done_and_no_scheduler_holds_it() -> None:
    now = datetime(2026, 12, 5, tzinfo=UTC)
    held = Driver(Lease("s", "o", "h", "id", 1, None, 30.0, now, now,
                        now + timedelta(seconds=30), now), None)
    assert held.live
    searching = status_of({}, trials_left=True)
    assert searching.work_left and not searching.ended  # no trial recorded, no driver
    assert not status_of({}, trials_left=True, driver=held).ended
    assert not status_of({"running": 1}).ended
    assert not status_of({"failed": 1}, retrying=1).ended
    assert not status_of({"succeeded": 2}, driver=held).ended  # its bookkeeping goes on
    assert status_of({"succeeded": 2}).ended  # a grid, or a search whose budget is spent
