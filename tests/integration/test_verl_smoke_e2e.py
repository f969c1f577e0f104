"""`kappa smoke verl` end to end on CPU, with a FAKE verl (slow).

No GPU exists on this machine, so the real smoke sweep cannot run here. Everything else
does, for real: the command builds the tiny model, prompts and spec, submits the 12 cells
to the real scheduler and local executor (``CUDA_VISIBLE_DEVICES`` names two pretend
devices; no CUDA is used), the phase driver launches ``settings.python``, which here is
:data:`FAKE_VERL` instead of verl's interpreter. The fake checks what a real verl would
need on the node (model folder, parquet files, reward file, plug-in variable), refuses
verl's own MLflow logger, and writes verl's file log at the path kappa forwards *in its
command line* (``+ray_kwargs.ray_init.runtime_env.env_vars.*``); kappa's phase driver
sends that log to the cell's MLflow run through the run folder's outbox. Then the
command's verdicts and exit code are checked.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from kit.cli import kappa
from kit.home import use_home

from orchestrator.backends.verl import smoke

pytestmark = pytest.mark.slow

FAKE_VERL = r'''
import json, os, sys
from pathlib import Path

PREFIX = "+ray_kwargs.ray_init.runtime_env.env_vars."
args = dict(a.split("=", 1) for a in sys.argv[3:] if "=" in a)
ray_env = {k[len(PREFIX):]: v.strip("'") for k, v in args.items() if k.startswith(PREFIX)}
# What verl needs on the node.
assert (Path(args["actor_rollout_ref.model.path"]) / "config.json").is_file()
for key in ("data.train_files", "data.val_files"):
    for name in args[key].strip("'[]").split(","):
        assert Path(name).is_file(), name
assert Path(args["reward.custom_reward_function.path"]).is_file()
assert ray_env["VERL_USE_EXTERNAL_MODULES"] == "kappa_verl"
assert "mlflow" not in args["trainer.logger"]  # kappa, not verl, logs to MLflow
bad = os.environ.get("FAKE_ZERO_GRAD", "").split(",") == [
    args["actor_rollout_ref.actor.policy_loss.loss_mode"], args["algorithm.adv_estimator"]]
total = int(args["trainer.total_training_steps"])
log = open(ray_env["VERL_FILE_LOGGER_PATH"], "w")
for step in range(1, total + 1):
    data = {"actor/pg_loss": 0.01 * step, "timing_s/gen": 0.2,
            "actor/grad_norm": 0.0 if bad and step == 2 else 0.5}
    log.write(json.dumps({"step": step, "data": data}) + "\n")
    log.flush()
ckpt = Path(args["trainer.default_local_dir"])
ckpt.mkdir(parents=True, exist_ok=True)
(ckpt / "latest_checkpointed_iteration.txt").write_text(str(total))
'''


def test_smoke_command_runs_twelve_cells_and_names_the_failing_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    use_home(tmp_path / "home", monkeypatch)
    monkeypatch.setenv("KAPPA_VERL_PREFLIGHT", "off")  # preflight: test_verl_smoke.py
    monkeypatch.setenv("KAPPA_VERL_POLL_SECONDS", "0.2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # two pretend devices for the executor
    monkeypatch.setattr(smoke, "gpu_problems", lambda: [])  # FAKE: no GPU here
    fake = tmp_path / "fake_verl_python"
    fake.write_text(f"#!{sys.executable}\n{FAKE_VERL}")
    fake.chmod(0o755)
    template = yaml.safe_load(smoke.TEMPLATE.read_text())
    template["base"]["python"] = str(fake)
    spec = tmp_path / "template.yaml"
    spec.write_text(yaml.safe_dump(template, sort_keys=False))
    out = tmp_path / "out"

    monkeypatch.setenv("FAKE_ZERO_GRAD", "kl_cov,reward_budget")
    code, text = kappa(capsys, "smoke", "verl", "--out", str(out), "--spec", str(spec))
    assert code == 1, text
    assert text.count("PASS  ") == 11, text
    assert "FAIL  baseline=kl_cov reward_budget=True" in text
    assert "actor/grad_norm = 0.0 at step 2 (must be > 0)" in text
    assert text.rstrip().endswith("smoke: 1 of 12 cells failed")
    assert (out / "model" / "model.safetensors").is_file()

    # Fixed: the whole sweep runs again, and passes on this run's metrics.
    monkeypatch.delenv("FAKE_ZERO_GRAD")
    code, text = kappa(capsys, "smoke", "verl", "--out", str(out), "--spec", str(spec))
    assert code == 0, text
    assert text.rstrip().endswith("smoke: all 12 cells passed")
