"""The verl GPU smoke test as far as a CPU machine goes: its spec, files, golden command
lines, verl's preflight, and the command's refusal without a GPU.

The smoke sweep itself (12 cells on a GPU with vLLM) has NOT run here: no GPU exists on
this machine. Regenerate the golden file with ``KAPPA_REGEN_GOLDEN=1``.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
from kit.cli import kappa
from verl_test_cells import BASELINES, REWARD_FILE

from orchestrator.backends.verl import smoke
from orchestrator.sweeps import smoke as smoke_spec
from orchestrator.sweeps.smoke import smoke_commands

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "verl" / "smoke.txt"
# Fixed paths keep the golden file machine-independent: the files need not exist for
# composing, only on the GPU node.
SMOKE_DIR = Path("/kappa-smoke")
RUNS = Path("/kappa-home/runs")


def _fixed_spec(tmp_path: Path) -> Path:
    path = tmp_path / "smoke.yaml"
    path.write_text(smoke_spec.spec_text(SMOKE_DIR, base={"reward_function_path": REWARD_FILE}))
    return path


def test_template_names_no_machine_path_and_renders_to_the_out_dir(tmp_path: Path) -> None:
    import yaml

    template = yaml.safe_load(smoke.TEMPLATE.read_text())["base"]
    assert all(str(template[k]).startswith(smoke_spec.SMOKE_VAR + "/")
               for k in ("model_path", "train_files", "val_files"))
    rendered = yaml.safe_load(smoke_spec.render_spec(tmp_path / "out").read_text())
    base = rendered["base"]
    assert base["model_path"] == str((tmp_path / "out" / "model").resolve())
    assert base["train_files"] == str((tmp_path / "out" / "data" / "train.parquet").resolve())
    assert smoke_spec.SMOKE_VAR not in str(rendered)
    assert rendered["axes"] == {"baseline": list(BASELINES), "reward_budget": [False, True]}


def test_prompts_are_verl_rows(tmp_path: Path) -> None:
    import re

    import pandas as pd

    train, val = smoke.write_prompts(tmp_path)
    frame = pd.read_parquet(train)
    assert list(frame.columns) == list(smoke.VERL_COLUMNS)
    assert len(frame) == smoke.TRAIN_PROMPTS and len(pd.read_parquet(val)) == smoke.VAL_PROMPTS
    for _, row in frame.iterrows():
        (message,) = row["prompt"]
        a, b = map(int, re.findall(r"\d+", message["content"])[:2])
        assert message["role"] == "user" and '"####"' in message["content"]
        # verl's gsm8k scorer (openai/gsm8k) reads the answer after ####.
        assert row["data_source"] == "openai/gsm8k"
        assert dict(row["reward_model"]) == {"style": "rule", "ground_truth": str(a + b)}
    assert list(frame["extra_info"].map(lambda e: e["index"])) == list(range(len(frame)))
    assert smoke.write_prompts(tmp_path) == (train, val)  # deterministic rewrite
    assert pd.read_parquet(train).equals(frame)


def test_golden_smoke_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_VERL_PREFLIGHT", "off")  # preflight: the test below
    commands = smoke_commands(_fixed_spec(tmp_path), RUNS)
    assert len(commands) == 12
    text = "".join(f"# {label}\n" + "\n".join(argv) + "\n\n" for label, argv in commands)
    if os.environ.get("KAPPA_REGEN_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "smoke.txt changed; review, then KAPPA_REGEN_GOLDEN=1"
    for _, argv in commands:
        args = dict(a.split("=", 1) for a in argv[3:])
        assert args["trainer.n_gpus_per_node"] == "1"
        assert args["trainer.total_training_steps"] == "2"
        assert args["actor_rollout_ref.model.path"] == "/kappa-smoke/model"
        assert args["actor_rollout_ref.rollout.name"] == "vllm"
        assert args["actor_rollout_ref.rollout.enforce_eager"] == "True"
        assert float(args["actor_rollout_ref.rollout.gpu_memory_utilization"]) <= 0.3
        assert args["+reward.custom_reward_function.reward_kwargs.reward_type"] == "random"


def _narrowed(spec: Path, baselines: list[str], rb: list[bool]) -> Path:
    import yaml

    data = yaml.safe_load(spec.read_text())
    data["axes"] = {"baseline": baselines, "reward_budget": rb}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


needs_verl = pytest.mark.skipif(importlib.util.find_spec("verl") is None,
                                reason="verl not installed")


@needs_verl
def test_smoke_cells_pass_verl_preflight_validate_and_plan(
        preflight_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two smoke cells (GRPO+RB: KL loss and the plug-in's estimator; DAPO: filter_groups
    with the smoke's metric override and the dapo reward manager) through verl's own
    Hydra config, by `kappa validate` and `kappa plan`. All 12: the slow test below."""
    spec = _narrowed(_fixed_spec(tmp_path), ["grpo", "dapo"], [True])
    code, out = kappa(capsys, "validate", str(spec))
    assert (code, out.strip()) == (0, "ok: 2 cells"), out
    code, out = kappa(capsys, "plan", str(spec), "--json")
    assert code == 0, out
    assert json.loads(out)["count"] == 2


@needs_verl
@pytest.mark.slow
def test_every_smoke_cell_passes_verl_preflight_validate_and_plan(
        preflight_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """All 12 cells composed by verl's own Hydra config (slow: ~1 s a cell, cold)."""
    spec = _fixed_spec(tmp_path)
    code, out = kappa(capsys, "validate", str(spec))
    assert (code, out.strip()) == (0, "ok: 12 cells"), out
    code, out = kappa(capsys, "plan", str(spec), "--json")
    assert code == 0, out
    plan = json.loads(out)
    assert (plan["count"], plan["resources"]["gpus"]) == (12, 1)


@needs_verl
def test_a_misspelt_smoke_override_fails_preflight(
        preflight_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "smoke.yaml"
    spec.write_text(smoke_spec.spec_text(SMOKE_DIR, base={
        "reward_function_path": REWARD_FILE,
        "extra_overrides": ["actor_rollout_ref.rollout.enforce_eagre=True"]}))
    code, out = kappa(capsys, "validate", str(_narrowed(spec, ["grpo"], [False])))
    assert code == 2 and "enforce_eagre" in out and "extra_overrides" in out, out


def test_smoke_without_gpu_stops_before_anything_with_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    if not smoke.gpu_problems():
        pytest.skip("this machine has a CUDA GPU and vLLM")
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    code, out = kappa(capsys, "smoke", "verl", "--out", str(tmp_path / "out"))
    assert code == 2, out
    assert "needs a CUDA GPU and vLLM" in out and "--dry-run" in out
    assert not (tmp_path / "out").exists() and not (tmp_path / "home").exists()
