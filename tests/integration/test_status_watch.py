"""``kappa status SWEEP --watch`` as a user runs it: a background sweep watched from
another ``kappa`` process until it ends (fake cells; the tiny embedded sweep is slow)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kappa_pg_server import PgServer
from kit.cli import process, run_kappa
from kit.home import use_home
from kit.kappa_main import KAPPA_SCRIPT
from kit.tiny_spec import tiny_embedded
from kit.wait import wait_until

from orchestrator.registry import CellState, Registry

SAFETY = 300  # seconds; a guard against hangs, not a speed assertion

FAKE = """\
name: {name}
backend: fake
base:
  steps: 3
  hold_while: {hold}
axes:
  variant:
    ok: {{}}
    broken: {{fail_at_step: 2}}
  seed: [0, 1]
"""

TINY = tiny_embedded("tiny-watch", {"baseline": ["grpo", "drgrpo"]}, val_every=2,
                     checkpoint_every=1)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch, cli=True)


def running(sweep: str) -> int:
    try:
        with Registry.open(create=False) as reg:
            return len(reg.cells(sweep, [CellState.RUNNING]))
    except Exception:  # not recorded yet
        return 0


def test_a_background_sweep_watched_to_its_end(home: Path, tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    hold.touch()  # cells wait before each step while it exists
    spec = tmp_path / "w.yaml"
    spec.write_text(FAKE.format(name="watched", hold=hold))
    process("submit", str(spec), "--max-parallel", "2")
    watcher = subprocess.Popen(
        [sys.executable, str(KAPPA_SCRIPT), "status", "watched", "--watch", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: running("watched") == 2, "two cells running")
    hold.unlink()  # let the sweep go on to its end
    out, err = watcher.communicate(timeout=SAFETY)
    assert watcher.returncode == 1, out + err  # two cells failed
    assert "watching watched every 0.2 s" in out
    assert "done" in out  # the progress lines of a log (not a terminal)
    assert out.count("failed: exit code 4") == 2 and "kappa logs" in out
    assert "watched ended: 2 succeeded · 2 failed" in out
    with Registry.open() as reg:
        assert reg.counts("watched")[CellState.SUCCEEDED] == 2


def test_refusals_exit_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_kappa(capsys, "status", "--watch").code == 2
    assert run_kappa(capsys, "status", "x", "--watch", "--interval", "0").code == 2
    Registry.open().close()  # an empty registry: the sweep is unknown
    ran = run_kappa(capsys, "status", "nosuch", "--watch")
    assert ran.code == 2, ran.output
    assert run_kappa(capsys, "status", "nosuch", "--watch", "--json").code == 2


@pytest.mark.postgres
def test_watched_on_postgres(pg_server: PgServer, home: Path, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    url = pg_server.create_database()
    monkeypatch.setenv("KAPPA_REGISTRY", url)  # the background scheduler's too
    try:
        spec = tmp_path / "pg.yaml"
        spec.write_text(FAKE.format(name="pg-watched", hold=tmp_path / "no-hold"))
        process("submit", str(spec), "--max-parallel", "2")
        watched = process("status", "pg-watched", "--watch", "--interval", "0.2", code=1,
                          timeout=SAFETY)
        assert "pg-watched ended: 2 succeeded · 2 failed" in watched.stdout
    finally:
        pg_server.drop_database(url)


@pytest.mark.slow
def test_a_tiny_embedded_sweep_watched_to_its_end(home: Path, tmp_path: Path) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY)
    process("submit", str(spec), "--max-parallel", "2", timeout=1200)
    watched = process("status", "tiny-watch", "--watch", "--interval", "0.5", code=0,
                      timeout=1200)
    assert "tiny-watch ended: 2 succeeded" in watched.stdout
    with Registry.open() as reg:
        assert [c.state for c in reg.cells("tiny-watch")] == [CellState.SUCCEEDED] * 2
