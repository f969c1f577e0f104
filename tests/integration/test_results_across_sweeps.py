"""``kappa table/export/report/convergence A B``: real embedded sweeps read as one (slow: trains).

Sweeps a and b run the same grid on different seeds: their cells pool (two seeds per row,
both sweeps named). Sweep c runs a's seed-0 baseline again, shorter: read with a, that
point is shown once per sweep with ``max_steps`` named, never averaged with a's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kit.cli import run_kappa
from kit.home import use_home
from kit.tiny_spec import tiny_embedded

from orchestrator.sweeps.driver import submit


def _submit(tmp_path: Path, name: str, steps: int, rb: str, seeds: str) -> None:
    spec = tmp_path / f"{name}.yaml"
    axes = {"reward_budget": yaml.safe_load(rb), "seed": yaml.safe_load(seeds)}
    spec.write_text(tiny_embedded(name, axes, max_steps=steps))
    submit(spec, wait=True, max_parallel=2)


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ")][2:]


@pytest.mark.slow
def test_two_embedded_sweeps_read_as_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    use_home(tmp_path / "home", monkeypatch)
    _submit(tmp_path, "hb-a", 3, "[false, true]", "[0]")
    _submit(tmp_path, "hb-b", 3, "[false, true]", "[1]")
    _submit(tmp_path, "hb-c", 2, "[false]", "[0]")

    ran = run_kappa(capsys, "table", "hb-a", "hb-b")
    assert ran.code == 0, ran.output
    rows = _rows(ran.out)
    # One row per arm, the two sweeps' seeds pooled, both sweeps named.
    assert [r[:3] for r in rows] == [["✗", "hb-a, hb-b", "2"], ["+ RB", "hb-a, hb-b", "2"]]
    assert "Sweep: the sweep(s) each row's runs come from" in ran.out

    ran = run_kappa(capsys, "table", "hb-a", "hb-c", "--format", "markdown")
    assert ran.code == 0, ran.output
    rows = _rows(ran.out)
    # Seed 0's baseline ran in both: each sweep's run on its own row, the difference named.
    assert [r[:3] for r in rows] == [["✗", "hb-a (max_steps=3)", "1"],
                                     ["+ RB", "hb-a (max_steps=3)", "1"],
                                     ["✗", "hb-c (max_steps=2)", "1"]]
    assert "never averaged together" in ran.out

    out = tmp_path / "both.json"
    ran = run_kappa(capsys, "export", "hb-a", "hb-c", "--format", "json", "--out", str(out))
    assert ran.code == 0, ran.output
    records = json.loads(out.read_text())
    assert [(r["sweep"], r["settings_diff"], r["step"]) for r in records] == [
        ("hb-a", "max_steps=3", 3), ("hb-a", None, 3), ("hb-c", "max_steps=2", 2)]

    report = tmp_path / "report.html"
    ran = run_kappa(capsys, "report", "hb-a", "hb-c", "--out", str(report))
    assert ran.code == 0, ran.output
    html = report.read_text()
    assert "hb-a + hb-c" in html and "hb-c (max_steps=2)" in html

    ran = run_kappa(capsys, "convergence", "hb-a", "hb-c", "--format", "csv")
    assert ran.code == 0, ran.output
    lines = ran.out.splitlines()
    assert lines[0].startswith("sweep,cell_id,state,")
    # Each sweep's run of seed 0's baseline keeps its own row and its own curve.
    assert sorted(line.split(",")[0] for line in lines[1:]) == ["hb-a", "hb-a", "hb-c"]
    assert all(int(line.split(",")[-3]) > 0 for line in lines[1:])  # points found
