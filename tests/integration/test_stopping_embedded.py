"""Each stopping rule stops a real embedded cell through the real scheduler (slow: trains).

The rules are chosen to fire at a known step whatever the tiny model learns: the
validation accuracy is at least 0 (threshold), the entropy is positive (diverged above
a tiny bound), the KL coefficient is logged unchanged every step (plateau).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kit.cli import run_kappa
from kit.home import use_home

from orchestrator.registry import CellState, Registry
from orchestrator.sweeps.driver import resume, submit

TINY = """\
name: {name}
backend: embedded
base:
  task: arithmetic
  group_size: 4
  prompts_per_step: 4
  ppo_mini_batches: 1
  max_steps: 300
  val_every: 1
  val_size: 8
  eval_samples: 2
  checkpoint_every: 100
  model: {{d_model: 16, n_layers: 1, n_heads: 2}}
  warm_start: {{steps: 5, batch_size: 8}}
retries: 2
stop: {stop}
"""

RULES = {
    "threshold": ("{threshold: {metric: val-core/arith-val/acc/mean@1, at_least: 0.0, "
                  "min_steps: 3}}", CellState.SUCCEEDED,
                  "threshold at step 3 (val-core/arith-val/acc/mean@1 = "),
    "diverged": ("{diverged: [{metric: actor/entropy, above: 0.001, for: 2}]}",
                 CellState.FAILED, "diverged at step 2 (actor/entropy above 0.001 for 2 logs"),
    "plateau": ("{plateau: {metric: actor/kl_coef, min_steps: 8, patience: 2}}",
                CellState.SUCCEEDED, "plateau at step 8 (actor/kl_coef)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("rule", sorted(RULES))
def test_a_rule_stops_a_real_embedded_cell(
        rule: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    use_home(tmp_path / "home", monkeypatch)
    stop, state, reason = RULES[rule]
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY.format(name=f"emb-{rule}", stop=stop))
    submit(spec, wait=True)
    with Registry.open() as reg:
        (cell,) = reg.cells(f"emb-{rule}")
    assert cell.state is state and cell.attempts_count == 1  # diverged: not retried
    assert (cell.stop_reason or "").startswith(reason), cell.stop_reason

    run_dir = Path(cell.run_dir or "")
    summary = json.loads((run_dir / "summary.json").read_text())
    stopped = summary["stopped"]
    at = stopped["at_step"]
    assert stopped["rule"] == rule and stopped["reason"] == cell.stop_reason
    assert summary["status"] == state.value and summary["steps"] == at < 300
    assert (run_dir / "checkpoints" / f"step_{at}.pt").exists()  # ended saved
    # The final evaluation ran where it stopped: the tables have its numbers.
    assert "eval/arith-val/mean@2" in summary["final"]
    assert cell.final_metrics == summary["final"] and cell.progress_step == at

    from mlflow import MlflowClient

    from orchestrator.tracking import Tracker

    run = MlflowClient(Tracker().uri).get_run(cell.mlflow_run_id or "")
    assert run.data.tags["kappa.stopped"] == cell.stop_reason
    assert run.info.status == ("FINISHED" if state is CellState.SUCCEEDED else "FAILED")
    assert "eval/arith-val/mean_at_2" in run.data.metrics

    if state is CellState.FAILED:  # a scheduler started again does not retry it either
        resume(f"emb-{rule}")
        with Registry.open() as reg:
            assert reg.cells(f"emb-{rule}")[0].attempts_count == 1

    # Wide: under xdist the terminal is 80 columns and the table would wrap the state.
    out = run_kappa(capsys, "status", f"emb-{rule}").output
    assert f"{state.value} (stopped: {reason.split(' (')[0]})" in out


@pytest.mark.slow
def test_a_comparison_group_of_real_embedded_cells_stops_at_one_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two cells that differ only in how often they validate: the threshold (validation
    # accuracy >= 0, from step 3) fires at the first validation from step 3 on, so at
    # step 4 for val_every 2 and at step 3 for val_every 3. As a group, both stop at one
    # step past both firing steps, on both cadences (a multiple of 6), and are evaluated
    # there.
    use_home(tmp_path / "home", monkeypatch)
    stop = ("{threshold: {metric: val-core/arith-val/acc/mean@1, at_least: 0.0, "
            "min_steps: 3}, together: [val_every]}")
    text = TINY.format(name="emb-group", stop=stop).replace("  val_every: 1\n", "")
    spec = tmp_path / "group.yaml"
    spec.write_text(text + "axes: {val_every: [2, 3]}\n")
    submit(spec, wait=True)
    with Registry.open() as reg:
        cells = reg.cells("emb-group")
    steps = set()
    for cell in cells:
        assert cell.state is CellState.SUCCEEDED, cell.last_error
        assert "together with 1 other cell" in (cell.stop_reason or ""), cell.stop_reason
        summary = json.loads((Path(cell.run_dir or "") / "summary.json").read_text())
        stopped = summary["stopped"]
        assert stopped["at_step"] == stopped["step"] == summary["steps"] == cell.progress_step
        assert "eval/arith-val/mean@2" in summary["final"]  # its final evaluation, there
        steps.add(stopped["at_step"])
    (step,) = steps
    assert step % 6 == 0 and 6 <= step < 300
