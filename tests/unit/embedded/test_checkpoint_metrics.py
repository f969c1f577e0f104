"""Checkpoint round trip, run-folder files, pass@k."""

from __future__ import annotations

import json
import random
from datetime import datetime
from pathlib import Path

import pytest
import torch

from orchestrator.backends.embedded.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from orchestrator.backends.embedded.evaluation import pass_at_k
from orchestrator.backends.embedded.metrics import RunFiles, progress_display, progress_line
from orchestrator.backends.embedded.model import ModelShape, build_model
from orchestrator.backends.embedded.tasks import TOKENIZER
from orchestrator.runs.metrics import truncate_metrics

SHAPE = ModelShape(TOKENIZER.vocab_size, 16, 16, 1, 2)


def test_checkpoint_round_trip_restores_model_optimizer_and_rng(tmp_path: Path) -> None:
    model = build_model(SHAPE, 0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    logits, _ = model(torch.ones(1, 3, dtype=torch.long), torch.ones(1, 3, dtype=torch.bool))
    logits.sum().backward()
    opt.step()
    torch.manual_seed(11)
    random.seed(11)
    save_checkpoint(tmp_path, 4, model, opt)
    expected_torch, expected_py = torch.rand(3), random.random()

    fresh = build_model(SHAPE, 99)
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-3)
    state = load_checkpoint(latest_checkpoint(tmp_path) or Path("missing"), torch.device("cpu"))
    fresh.load_state_dict(state.model)
    fresh_opt.load_state_dict(state.optimizer)
    restore_rng(state)
    assert state.step == 4
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 fresh.state_dict().values(), strict=True))
    assert torch.equal(fresh_opt.state_dict()["state"][0]["exp_avg"],
                       opt.state_dict()["state"][0]["exp_avg"])
    assert torch.equal(torch.rand(3), expected_torch)
    assert random.random() == expected_py


def test_latest_checkpoint_and_pruning(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path) is None
    model = build_model(SHAPE, 0)
    opt = torch.optim.AdamW(model.parameters())
    for step in (2, 10, 4, 6):
        save_checkpoint(tmp_path, step, model, opt, keep=2)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["step_10.pt", "step_6.pt"]  # newest two by step, no temp files left
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoints" / "step_10.pt"


def test_run_files_and_truncation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    files = RunFiles(tmp_path, total_steps=3)
    for step in range(4):
        files.log(step, {"a": float(step), "nan": float("nan")})
        files.progress(step)
    with files.metrics_path.open("a") as fh:
        fh.write('{"step": 9, "metr')  # a line cut short by a kill
    files.log(1, {"eval/x/mean@2": 0.5})  # a final evaluation at the resume step: redone
    truncate_metrics(files.metrics_path, 1)
    lines = [json.loads(x) for x in files.metrics_path.read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 1]
    assert lines[0]["metrics"] == {"a": 0.0}  # non-finite values are dropped
    assert json.loads((tmp_path / "progress.json").read_text()) == {"step": 3, "total_steps": 3}
    files.summary(3, {"x": 1})
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary == {"status": "succeeded", "steps": 3, "final": {"x": 1.0}}


def test_run_files_keep_the_evaluators_metric_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tables show benchmarks in the order the task lists them, not alphabetically."""
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    files = RunFiles(tmp_path, total_steps=1)
    order = ["eval/b-val/mean@2", "eval/b-hard/mean@2", "eval/b-harder/mean@2"]
    files.log(1, dict.fromkeys(order, 0.5))
    line = json.loads(files.metrics_path.read_text().splitlines()[0])
    assert list(line["metrics"]) == order
    files.summary(1, dict.fromkeys(order, 0.5))
    assert list(json.loads((tmp_path / "summary.json").read_text())["final"]) == order


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (8, 0, 8, 0.0), (8, 1, 8, 1.0), (8, 8, 1, 1.0), (4, 1, 1, 0.25), (4, 2, 2, 1 - 1 / 6),
    (10, 3, 5, 1 - 21 / 252),
])
def test_pass_at_k_unbiased_estimator(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_bad_counts() -> None:
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 2)


def test_progress_lines_name_step_time_and_main_metrics() -> None:
    metrics = {"critic/score/mean": 0.25, "actor/entropy": 1.5, "timing_s/step": 0.1,
               "val-core/add-val/acc/mean@1": 0.875}
    line = progress_line(3, 10, metrics, now=datetime(2026, 12, 5, 10, 31, 2))
    assert line == ("[kappa] 2026-12-05 10:31:02 step 3/10  score 0.250  entropy 1.500  "
                    "val acc 0.875")


def test_redirected_progress_prints_a_flushed_line_every_few_steps(
        capsys: pytest.CaptureFixture[str]) -> None:
    with progress_display(250, 0, bar=False) as advance:
        for step in range(1, 251):
            advance(step, {"critic/score/mean": 0.5} | (
                {"val-core/x/acc/mean@1": 0.5} if step == 7 else {}))
    steps = [int(line.split(" step ")[1].split("/")[0])
             for line in capsys.readouterr().out.splitlines()]
    assert steps == sorted({7, *range(2, 251, 2)})  # every 2nd step of 250, and validations
