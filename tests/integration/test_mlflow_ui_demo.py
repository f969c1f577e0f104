"""The demo as a user sees it in the MLflow UI, in a real browser: ``kappa demo`` (the
real embedded trainer on the demo's spec, cut to 2 RL steps so it ends in minutes), then
``kappa ui toy-demo --open`` and headless Chromium on the URL it printed and on the parent
run's table artifact.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.home import seed_mlflow_store
from kit.mlflow_ui import Served, rendered, rendered_until, served

from orchestrator.registry import Registry

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "experiments" / "toy" / "demo.yaml"
CELLS = 12  # 2 baselines x reward budgeting on/off x 3 seeds

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def served_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The demo's 12 cells run by ``kappa demo`` at 2 steps, served by ``kappa ui``."""
    home = tmp_path_factory.mktemp("demo") / "home"
    seed_mlflow_store(home)
    spec = home.parent / "demo.yaml"
    text = DEMO.read_text()
    assert "  max_steps: 100\n" in text, "the demo's spec changed: update this test"
    spec.write_text(text.replace("  max_steps: 100\n", "  max_steps: 2\n"))
    # The summary is off for the rest of the suite (tests/conftest.py); a user has it on.
    env = {**os.environ, "KAPPA_HOME": str(home), "KAPPA_MLFLOW_SUMMARY": "1"}
    done = subprocess.run([sys.executable, "-m", "orchestrator", "demo", str(spec)],
                          env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with served(home, "toy-demo") as up:
        yield up


def _parent(up: Served) -> tuple[str, str]:
    with Registry.open(f"sqlite:///{up.home / 'registry.db'}") as reg:
        sweep = reg.get_sweep("toy-demo")
        assert len(reg.cells("toy-demo")) == CELLS
    return sweep.mlflow_experiment_id or "", sweep.mlflow_parent_run_id or ""


def test_the_printed_url_charts_all_twelve_cells_grouped_by_reward_budget(
        served_demo: Served, tmp_path: Path) -> None:
    """A fresh browser (nothing remembered) on the printed URL: every cell under its short
    name, in two groups of six (the compared axis), each group a line of the charts."""
    legend = re.compile(r"(true|false) \(eval/[\w-]+/mean_at_8\)")
    dom = rendered_until(served_demo.printed, tmp_path / "runs", ["matching runs"])
    for attempt in range(2):  # the legends draw once the metrics arrive
        if {m.group(1) for m in legend.finditer(dom)} == {"true", "false"}:
            break
        dom = rendered(served_demo.printed, tmp_path / f"again-{attempt}")
    # The cells and the parent run (which MLflow lists beside its children).
    assert re.search(rf"<strong>{CELLS + 1}</strong> matching runs", dom), dom[-3000:]
    names = {f"{b} {rb}RB s{s}" for b in ("grpo", "drgrpo") for rb in "+-" for s in "012"}
    shown = set(re.findall(r">([a-z]+ [+-]RB s\d)<", dom))
    assert names <= shown, sorted(names - shown)
    for group in ("true", "false"):
        assert re.search(rf"Group: {group}.{{0,1000}}?>{CELLS // 2}<", dom, re.S), group
    assert {m.group(1) for m in legend.finditer(dom)} == {"true", "false"}, dom[-3000:]


def test_the_parent_runs_table_artifact_shows_the_ablation(
        served_demo: Served, tmp_path: Path) -> None:
    """The address ``kappa ui`` prints for 'its table and report', then the markdown table
    itself as the artifact view renders it: both baselines, their '+ RB' rows, the metric."""
    experiment, parent = _parent(served_demo)
    printed = served_demo.log.read_text()
    assert f"/#/experiments/{experiment}/runs/{parent}/artifacts" in printed
    url = (f"{served_demo.base}/#/experiments/{experiment}/runs/{parent}"
           "/artifactPath/ablation/main-table.md")
    dom = rendered_until(url, tmp_path / "table", ["Main table", "DrGRPO"])
    assert "toy-demo: Main table" in dom, dom[-3000:]
    assert "Metric: eval/*/mean@8" in dom
    for row in ("GRPO", "DrGRPO", "+ RB", "arith-val", "Average"):
        assert row in dom, row
    assert "paired t-interval" in dom
