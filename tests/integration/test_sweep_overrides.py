"""``kappa submit SPEC OVERRIDE...`` through the real entry point, on real SQLite and
MLflow stores with fake cells: the sweep records the spec as resolved after the
overrides, and the overrides, where ``status``, ``resume`` and the MLflow parent run
read them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kit.cli import run_kappa
from kit.fake_backend import write_spec
from kit.home import use_home
from markupsafe import escape as html_escape

from orchestrator.grid.plan import parse_plan, stored_plan
from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.submission import OVERRIDES_TAG
from orchestrator.tracking import Tracker

OVERRIDES = ("base.steps=1", "axes.seed=[0, 1]", "name=ovr-quick")
TYPED = "base.steps=1 'axes.seed=[0, 1]' name=ovr-quick"  # as a shell would take them


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch)


def test_submit_records_the_resolved_spec_and_the_overrides(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path / "s.yaml", "ovr", seeds=3, steps=4)
    ran = run_kappa(capsys, "submit", str(spec), *OVERRIDES, "--wait", "--max-parallel", "2")
    assert ran.code == 0, ran.output
    assert "sweep ovr-quick: 2 cells" in ran.out
    with Registry.open() as reg:
        sweep = reg.get_sweep("ovr-quick")
        cells = reg.cells("ovr-quick")
        assert reg.find_sweep("ovr") is None
    assert [c.state for c in cells] == [CellState.SUCCEEDED] * 2
    assert sorted(c.settings["steps"] for c in cells) == [1, 1]
    # The stored text is the resolved spec: planned again, it makes the very same cells.
    assert sweep.spec_text.startswith(f"# {spec} as resolved with command-line overrides (")
    assert "name: ovr-quick\n" in sweep.spec_text and TYPED not in sweep.spec_text
    replanned = parse_plan(sweep.spec_text, "stored")
    assert sorted(c.cell_id for c in replanned.cells) == sorted(c.cell_id for c in cells)
    assert stored_plan(sweep.name, sweep.plan).overrides == OVERRIDES
    tracker = Tracker()
    parent = tracker.client.get_run(sweep.mlflow_parent_run_id or "")
    assert parent.data.tags[OVERRIDES_TAG] == TYPED
    logged = Path(tracker.client.download_artifacts(parent.info.run_id, "spec.yaml",
                                                    str(tmp_path)))
    assert logged.read_text() == sweep.spec_text
    # The report's spec section is the stored (resolved) spec.
    ran = run_kappa(capsys, "report", "ovr-quick", "--out", str(tmp_path / "r.html"))
    assert ran.code == 0, ran.output
    html = (tmp_path / "r.html").read_text()
    assert "as resolved with command-line overrides" in html
    assert f"command-line overrides <code>{html_escape(TYPED)}</code>" in html
    # What status shows.
    ran = run_kappa(capsys, "status", "ovr-quick", "--json")
    assert ran.code == 0 and json.loads(ran.out)["overrides"] == list(OVERRIDES), ran.output
    ran = run_kappa(capsys, "status", "ovr-quick")
    assert f"overrides: {TYPED}" in ran.out, ran.output


def test_a_bad_override_on_submit_exits_2_and_writes_nothing(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path / "s.yaml", "ovr-bad", seeds=2)
    before = sorted(p.name for p in home.iterdir())
    ran = run_kappa(capsys, "submit", str(spec), "base.stepz=1", "~exclude", "--wait")
    assert ran.code == 2, ran.output
    assert "override 1: base.stepz" in ran.err and "override 2: exclude" in ran.err
    assert "did you mean 'steps'?" in ran.err
    ran = run_kappa(capsys, "search", str(spec), "base.steps=0")
    assert ran.code == 2 and "override 1: base.steps" in ran.err, ran.output
    assert sorted(p.name for p in home.iterdir()) == before
