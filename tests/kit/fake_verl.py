"""A FAKE verl for tests on a machine without GPUs: an executable standing in for verl's
``python3``. It emulates verl's *files* (the file log at ``VERL_FILE_LOGGER_PATH``, the
checkpoint tracker, a resume from it), not its math, and never talks to MLflow: kappa
sends verl's metrics itself (``orchestrator/backends/verl/logs.py``), so the fake
refuses a command that would switch verl's own MLflow logger on.

Knobs (environment): ``FAKE_VERL_FAIL_AT=N`` exits 3 before logging step N (with
``FAKE_VERL_FAIL_ONCE=1`` only the first time, as a crash a retry gets past);
``FAKE_VERL_STEP_SECONDS`` is how long a step takes. Every call is recorded in the run
folder's ``calls.jsonl``; each line logs ``fake/launch``, the number of that call, so a
step a later launch redid can be told from the first one.
"""

from __future__ import annotations

import sys
from pathlib import Path

FAKE_VERL = r'''
import json, os, sys, time
from pathlib import Path
args = dict(a.split("=", 1) for a in sys.argv[3:] if "=" in a)
assert "mlflow" not in args["trainer.logger"], "kappa, not verl, logs to MLflow"
ckpt = Path(args["trainer.default_local_dir"])
tracker = ckpt / "latest_checkpointed_iteration.txt"
start = int(tracker.read_text()) if tracker.exists() else 0
total = int(args["trainer.total_training_steps"])
run_dir = Path.cwd()
calls = run_dir / "calls.jsonl"
launch = len(calls.read_text().splitlines()) if calls.exists() else 0
with open(calls, "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "start": start,
                        "coef": os.environ.get("KAPPA_ENTROPY_REWARD_COEF")}) + "\n")
log = open(os.environ["VERL_FILE_LOGGER_PATH"], "w")
def emit(step, data):
    log.write(json.dumps({"step": step, "data": data}) + "\n"); log.flush()
if args.get("trainer.val_only") == "True":
    emit(start, {"val-core/math500/acc/mean@8": 0.5})
    sys.exit(0)
fail_at = int(os.environ.get("FAKE_VERL_FAIL_AT", "-1"))
failed_once = run_dir / "fake-verl-failed-once"
if os.environ.get("FAKE_VERL_FAIL_ONCE") and failed_once.exists():
    fail_at = -1
pause = float(os.environ.get("FAKE_VERL_STEP_SECONDS", "0"))
ckpt.mkdir(parents=True, exist_ok=True)
coef = float(args["actor_rollout_ref.actor.entropy_coeff"])
for step in range(start + 1, total + 1):
    time.sleep(pause)
    if step == fail_at:
        failed_once.touch()
        sys.exit(3)
    emit(step, {"actor/entropy": 1.0 + coef * 100, "critic/score/mean": step / total,
                "fake/launch": launch, "note": "not a number"})
    if step % int(args["trainer.save_freq"]) == 0 or step == total:
        tracker.write_text(str(step))
'''


def write_fake_verl(folder: Path) -> Path:
    """The fake as an executable ``folder/fake_python`` (run by this test's Python)."""
    path = folder / "fake_python"
    path.write_text(f"#!{sys.executable}\n{FAKE_VERL}")
    path.chmod(0o755)
    return path
