"""Settings validation (all problems at once), the backend's launch, and `kappa train` errors."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.backends import get_backend
from orchestrator.backends.embedded.backend import EmbeddedBackend
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.errors import UserInputError


def test_backend_registry_and_launch_is_pure(tmp_path: Path) -> None:
    backend = get_backend("embedded")
    assert isinstance(backend, EmbeddedBackend)
    raw = {"task": "addition"}
    spec = backend.launch(raw, tmp_path / "run", backend.demand(backend.validate(raw)))
    assert spec.argv == (sys.executable, "-m", "orchestrator", "train",
                         str(tmp_path / "run" / "config.yaml"), "--out", str(tmp_path / "run"))
    assert spec.gpus == 0
    assert not (tmp_path / "run").exists()
    cuda = {"device": "cuda"}
    assert backend.launch(cuda, tmp_path, backend.demand(backend.validate(cuda))).gpus == 1


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(UserInputError) as info:
        EmbeddedBackend().validate({"task": "arithmatic", "group_size": 1, "learing_rate": 1e-3,
                                    "model": {"d_model": 30, "n_heads": 4}})
    locations = {p.location for p in info.value.problems}
    assert {"task", "group_size", "learing_rate", "model"} <= locations
    assert "arithmetic" in info.value.render()  # the unknown task lists the known ones


def test_cross_field_problems_are_collected_together() -> None:
    with pytest.raises(UserInputError) as info:
        EmbeddedBackend().validate({"prompts_per_step": 5, "ppo_mini_batches": 2,
                                    "reward_correct": 0.0, "benchmarks": ["arith-nope"],
                                    "max_response_length": 60})
    text = info.value.render()
    for fragment in ("divisible", "reward_correct", "arith-nope", "context_length"):
        assert fragment in text


def test_algorithm_resolution() -> None:
    grpo = EmbeddedSettings().algorithm
    assert (grpo.advantage, grpo.use_kl_loss, grpo.kl_coef) == ("grpo", True, 0.001)
    rb = EmbeddedSettings(baseline="dapo", reward_budget=True, clip_ratio="inf").algorithm
    assert rb.advantage == "reward_budget" and rb.dynamic_sampling and rb.overlong_penalty
    assert math.isinf(rb.clip_ratio_low) and math.isinf(rb.clip_ratio_high)
    assert EmbeddedSettings(baseline="drgrpo", kl_coef=0.005).algorithm.use_kl_loss


def test_kappa_train_rejects_bad_config_before_any_work(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("task: nope\ngroup_size: 0\n")
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "train", str(config),
                           "--out", str(out)], capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "task" in proc.stderr and "group_size" in proc.stderr
    assert not out.exists()


def test_kappa_train_rejects_non_mapping_yaml(tmp_path: Path) -> None:
    from orchestrator.cli.train_cmd import load_settings

    config = tmp_path / "config.yaml"
    config.write_text("- a\n- b\n")
    with pytest.raises(UserInputError, match="mapping"):
        load_settings(config)
    config.write_text("task: [unclosed\n")
    with pytest.raises(UserInputError, match="YAML") as info:
        load_settings(config)
    assert info.value.problems[0].line is not None


def test_kappa_train_locates_problems_in_the_file(tmp_path: Path) -> None:
    from orchestrator.cli.train_cmd import load_settings

    config = tmp_path / "config.yaml"
    config.write_text("seed: 1\nbaseline: grop\nmodel:\n  d_model: 30\n  n_heads: 4\n")
    with pytest.raises(UserInputError) as info:
        load_settings(config)
    where = {p.location: (p.file, p.line) for p in info.value.problems}
    assert where["baseline"] == (str(config), 2)
    assert any(loc.startswith("model") and line in (3, 4) for loc, (_, line) in where.items())


def test_device_resolution() -> None:
    import torch

    from orchestrator.backends.embedded.model import resolve_device

    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    if not torch.cuda.is_available():
        with pytest.raises(UserInputError, match="cuda"):
            resolve_device("cuda")
