"""A search another scheduler drives has not ended before its trials are recorded: a
second ``kappa search --wait`` (``resume``) waits for it, or takes it over, instead of
calling an empty sweep done (the race a fast resubmit exposed on two machines). The two
states are set explicitly on a real SQLite registry and Optuna storage: the sweep recorded
with no trial yet while this test holds its lease as "the other machine", then released."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit.fake_backend import SEARCH_METRIC, search_spec
from kit.home import use_home

from orchestrator.analysis.studies import study_summaries
from orchestrator.registry import CellState, Registry
from orchestrator.scheduler.lease import SchedulerLease
from orchestrator.scheduler.options import SchedulerOptions
from orchestrator.sweeps.driver import resume
from orchestrator.sweeps.submission import prepare, record
from orchestrator.sweeps.sweep import Sweep
from orchestrator.tracking import Tracker

SEARCH = f"""  space: {{x: {{uniform: [0.0, 1.0]}}}}
  objective: {{metric: {SEARCH_METRIC}, direction: maximize}}
  trials: 2
  parallel: 1
  seed: 0
"""


def test_a_search_with_no_trial_recorded_is_waited_for_not_ended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_home(tmp_path / "home", monkeypatch)
    prepared = prepare(search_spec(tmp_path / "s.yaml", "waits", SEARCH, steps=2))
    ticks: list[int] = []
    with Registry.open() as reg:
        record(prepared, reg, Tracker())
        other = SchedulerLease(reg, "waits")  # the other machine drives it, no trial asked yet
        other.acquire()
        status = Sweep(reg, "waits").active_status()
        assert status.driver.live and status.work_left and not status.ended
        other.release()
        undriven = Sweep(reg, "waits").active_status()  # its driver gone before any trial
        assert not undriven.driver.live and undriven.trials_left and not undriven.ended

        def tick(registry: Registry, sweep: str) -> None:
            """The waiting side's first tick: the sweep still has no cell; the other
            machine lets go (as when it ends or dies), so this one takes over."""
            if not ticks:
                assert registry.cells(sweep) == []
                other.release()
            ticks.append(1)

        other.acquire()
        try:
            counts = resume("waits", options=SchedulerOptions(on_tick=tick))
        finally:
            other.release()
        assert ticks, "resume returned without waiting for the driven search"
        assert counts[CellState.SUCCEEDED] == 2, counts
        (study,) = study_summaries(reg, reg.get_sweep("waits"))
        ended = Sweep(reg, "waits").active_status()
    assert [t.state for t in study.trials] == ["COMPLETE", "COMPLETE"]
    assert not ended.trials_left and ended.ended


def test_the_studies_storage_is_opened_by_one_process_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduler creating Optuna's tables and a waiting machine reading the studies
    collided (a duplicate ``alembic_version`` key on PostgreSQL): opening the storage holds
    the registry's record lock, here seen from another descriptor as a second process would."""
    import fcntl
    import os

    import optuna

    from orchestrator.registry.sweeps import sqlite_lock_path
    from orchestrator.search.hook import open_storage

    real = optuna.storages.RDBStorage
    held: list[bool] = []

    def opened(*args: object, **kwargs: object) -> object:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    with Registry.open(f"sqlite:///{tmp_path / 'registry.db'}") as reg:
        lock = sqlite_lock_path(reg.engine)
        assert lock is not None
        monkeypatch.setattr(optuna.storages, "RDBStorage", opened)
        open_storage(reg.engine)
    assert held == [True]
