"""Helpers of the verl backend tests: paper-sized cells, a fake verl executable."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from orchestrator.backends.verl.settings import VerlSettings

BASELINES = ("grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov")
# A fixed reward-file path keeps golden files independent of where the plug-in lives.
REWARD_FILE = "/opt/kappa/plugins/kappa_verl/rewards.py"
RUN_DIR = Path("/runs/paper-table2/c0ffee")


def cell(**overrides: Any) -> VerlSettings:
    """A paper-sized cell (Qwen3-8B, Appendix B.2) with ``overrides`` applied."""
    base: dict[str, Any] = dict(
        model_path="Qwen/Qwen3-8B", train_files="/data/train.parquet",
        val_files="/data/val.parquet", reward_function_path=REWARD_FILE,
        tensor_parallel_size=2)
    return VerlSettings.model_validate(base | overrides)


FAKE_VERL = r'''
import json, os, sys
from pathlib import Path
args = dict(a.split("=", 1) for a in sys.argv[3:] if "=" in a)
ckpt = Path(args["trainer.default_local_dir"])
tracker = ckpt / "latest_checkpointed_iteration.txt"
start = int(tracker.read_text()) if tracker.exists() else 0
total = int(args["trainer.total_training_steps"])
run_dir = Path.cwd()
with open(run_dir / "calls.jsonl", "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "start": start,
                        "coef": os.environ.get("KAPPA_ENTROPY_REWARD_COEF")}) + "\n")
log = open(os.environ["VERL_FILE_LOGGER_PATH"], "w")
def emit(step, data):
    log.write(json.dumps({"step": step, "data": data}) + "\n"); log.flush()
if args.get("trainer.val_only") == "True":
    emit(start, {"val-core/math500/acc/mean@8": 0.5})
    sys.exit(0)
fail_at = int(os.environ.get("FAKE_VERL_FAIL_AT", "-1"))
ckpt.mkdir(parents=True, exist_ok=True)
coef = float(args["actor_rollout_ref.actor.entropy_coeff"])
for step in range(start + 1, total + 1):
    if step == fail_at:
        sys.exit(3)
    emit(step, {"actor/entropy": 1.0 + coef * 100, "critic/score/mean": step / total,
                "note": "not a number"})
    if step % int(args["trainer.save_freq"]) == 0 or step == total:
        tracker.write_text(str(step))
'''


def write_fake_verl(folder: Path) -> Path:
    """An executable standing in for ``python3``: it emulates verl's files, not its math."""
    path = folder / "fake_python"
    path.write_text(f"#!{sys.executable}\n{FAKE_VERL}")
    path.chmod(0o755)
    return path
