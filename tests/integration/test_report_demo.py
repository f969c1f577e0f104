"""``kappa demo`` ends with the sweep's ablation table and writes the HTML report (real
``kappa`` process, fake backend whose summary.json has eval/<benchmark>/mean@k)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kit.home import seed_mlflow_store
from kit.kappa_main import KAPPA_SCRIPT

from orchestrator.analysis.report import demo_table_spec
from orchestrator.analysis.tables.labels import default_metric_glob

SPEC = """\
name: demo-mini
backend: fake
base: {steps: 1, step_seconds: 0}
axes:
  baseline: [grpo, dapo]
  reward_budget: [false, true]
  seed: [0, 1]
"""


def test_demo_prints_the_ablation_table_and_writes_the_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    seed_mlflow_store(home)
    spec = tmp_path / "demo.yaml"
    spec.write_text(SPEC)
    env = {**os.environ, "KAPPA_HOME": str(home), "KAPPA_POLL_INTERVAL": "0.05",
           "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, str(KAPPA_SCRIPT), "demo", str(spec),
                           "--max-parallel", "2"],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "demo-mini: ablation table (eval/*/mean@4" in out
    table = out[out.index("ablation table"):out.index("report:")]
    # Rows per baseline, each with its reward-budget delta row; the toy metric column.
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    assert [line.split(" | ")[0] for line in lines] == [
        "| Method", "| ---", "| GRPO", "| + RB", "| DAPO", "| + RB"]
    assert lines[0].split(" | ")[2] == "toy"  # the benchmark column
    # grpo: 0.41 / 0.42 over seeds -> 41.5 points; + RB adds 5 points in every seed.
    assert "41.50" in lines[2] and "+5.00" in lines[3]
    report = home / "reports" / "demo-mini.html"
    assert str(report) in "".join(out.split())
    html = report.read_text()
    assert "Ablation (kappa demo)" in html and "demo-mini" in html
    assert "registry:" in out and "MLflow:" in out and "kappa ui" in out
    # It ends with the findings page's rule on the pooled '+ RB' delta (+5 in every pair),
    # then which code and machine made the numbers (this is the fake backend: none recorded).
    verdict, made = out.rstrip().splitlines()[-2:]
    assert made == "made by:   not recorded", out
    assert verdict.startswith("verdict:   RB − baseline, Average: +5.00 [+5.00, +5.00] (n=4 pairs, "
                           "2 baselines, pooled paired t): reproduces"), out


def test_table_layout_follows_the_axes() -> None:
    names = ["eval/a/mean@8", "eval/b/mean@8", "eval/a/mean@1", "eval/a/pass@8"]
    assert default_metric_glob(names) == "eval/*/mean@8"
    assert default_metric_glob(["eval/a/mean@2", "eval/b/mean@2"]) == "eval/*/mean@2"
    assert default_metric_glob(["eval/a/pass@4", "x"]) == "eval/*/pass@4"
    assert default_metric_glob(["val-core/a/acc/mean@1"]) == "val-core/*/acc/mean@1"
    assert default_metric_glob(["actor/entropy"]) is None
    spec = demo_table_spec(["baseline", "reward_budget", "seed"], "eval/*/mean@8")
    assert spec.rows == ("baseline",) and spec.delta is not None
    assert (spec.delta.axis, spec.delta.base, spec.blocks) == ("reward_budget", "false", None)
    assert demo_table_spec(["baseline"], "m").delta is None
    only_rb = demo_table_spec(["reward_budget", "seed"], "m")
    assert (only_rb.rows, only_rb.delta) == (("reward_budget",), None)
