"""A ``KAPPA_HOME`` moved after its sweeps ran keeps working: the registry records each run
folder's absolute path, and a folder that moved with the home is found under the new one.
A log that is really gone is an error (exit 1) that says where it was looked for."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kit.cli import run_kappa
from kit.fake_backend import write_spec
from kit.home import use_home

from orchestrator.registry import Registry
from orchestrator.sweeps.driver import submit


def test_a_moved_home_keeps_its_logs_and_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    old = use_home(tmp_path / "old", monkeypatch)
    submit(write_spec(tmp_path / "s.yaml", "moving", seeds=2, steps=2), wait=True)
    with Registry.open() as reg:
        first, second = (c.cell_id for c in reg.cells("moving"))
    new = tmp_path / "new"
    shutil.move(old, new)
    monkeypatch.setenv("KAPPA_HOME", str(new))

    ran = run_kappa(capsys, "logs", first)
    assert ran.code == 0 and "fake trainer: done" in ran.out, ran.output
    with Registry.open() as reg:
        cell = reg.get_cell("moving", first)
    assert cell.run_dir == str(new / "runs" / "moving" / first)
    status = run_kappa(capsys, "status", "moving")
    assert status.code == 0 and "succeeded" in status.out

    shutil.rmtree(new / "runs" / "moving" / second)
    gone = run_kappa(capsys, "logs", second)
    assert gone.code == 1
    assert f"no log at {new / 'runs' / 'moving' / second / 'train.log'}" in gone.err
    assert "run folder is gone" in gone.err and str(new) in gone.err


def test_a_pending_cell_has_no_log_yet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    use_home(tmp_path / "home", monkeypatch)
    from orchestrator.sweeps.stores import Stores
    from orchestrator.sweeps.submission import prepare, record
    from orchestrator.tracking import Tracker

    with Stores().open_registry() as reg:
        result = record(prepare(write_spec(tmp_path / "s.yaml", "waiting", seeds=1)), reg,
                        Tracker(None))
        (cell,) = reg.cells(result.sweep)
    ran = run_kappa(capsys, "logs", cell.cell_id)
    assert ran.code == 1 and "is pending, never launched" in ran.err, ran.output


def test_only_missing_folders_of_the_path_rule_are_looked_for_under_the_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.paths import rehomed_run_dir

    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    here = tmp_path / "home" / "runs" / "s" / "c1"
    elsewhere = tmp_path / "other-machine" / "runs" / "s" / "c1"
    assert rehomed_run_dir(str(elsewhere), "s") == str(here)  # moved with the home
    elsewhere.mkdir(parents=True)  # still there (a registry shared by two homes): kept
    assert rehomed_run_dir(str(elsewhere), "s") == str(elsewhere)
    custom = tmp_path / "scratch" / "c1"  # not a folder the path rule made: as stored
    assert rehomed_run_dir(str(custom), "s") == str(custom)
    assert rehomed_run_dir(None, "s") is None
