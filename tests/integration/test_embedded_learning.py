"""GRPO actually learns: a short run on the easiest task beats its warm start on validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.trainer import train


def test_short_grpo_run_improves_validation_accuracy(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    settings = EmbeddedSettings(
        task="addition", baseline="grpo", seed=0, max_steps=30, prompts_per_step=16,
        group_size=8, val_every=10, val_size=200, eval_samples=1, benchmarks=("add-val",),
        checkpoint_every=30)
    final = train(settings, tmp_path / "run", progress=False)
    first = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    warm = first["metrics"]["warm_start/val_acc"]
    assert 0.2 <= warm <= 0.8  # the warm start leaves room to improve
    assert final["val-core/add-val/acc/mean@1"] > warm + 0.03
