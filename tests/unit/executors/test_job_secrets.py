"""A job's secrets stay out of what a cluster shows (:mod:`orchestrator.executors.job_secrets`):
split from the shown variables, written for the user only, loaded by the entrypoint's
wrapper. The slow tests/integration/test_ray_placement.py checks Ray's runtime_env."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from orchestrator.executors.job_secrets import (
    SECRET_ENV_FILE_VAR,
    load_secret_env,
    split_secrets,
    wrapped,
    write_secret_env,
)

URI = "postgresql://kappa:s3cret@db:5432/mlflow"


def test_secrets_are_split_by_value_and_by_name() -> None:
    shown, secret = split_secrets({
        "MLFLOW_TRACKING_URI": URI, "MLFLOW_TRACKING_TOKEN": "t0k", "MLFLOW_RUN_ID": "abc",
        "AWS_SECRET_ACCESS_KEY": "k", "VERL_USE_EXTERNAL_MODULES": "kappa_verl",
        "PLAIN_URI": "http://mlflow:5000"})
    assert shown == {"MLFLOW_RUN_ID": "abc", "VERL_USE_EXTERNAL_MODULES": "kappa_verl",
                     "PLAIN_URI": "http://mlflow:5000"}
    assert secret == {"MLFLOW_TRACKING_URI": URI, "MLFLOW_TRACKING_TOKEN": "t0k",
                      "AWS_SECRET_ACCESS_KEY": "k"}


def test_the_file_is_for_the_user_only_and_loads_without_overriding(tmp_path: Path) -> None:
    path = write_secret_env(tmp_path / "run", {"MLFLOW_TRACKING_URI": URI, "B": "2"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    env = {SECRET_ENV_FILE_VAR: str(path), "B": "kept"}
    assert load_secret_env(env) == 1
    assert env["MLFLOW_TRACKING_URI"] == URI and env["B"] == "kept"
    assert load_secret_env({}) == 0  # no file named: nothing to do
    assert load_secret_env({SECRET_ENV_FILE_VAR: str(tmp_path / "gone.json")}) is None


def test_the_wrapper_gives_the_command_its_secrets(tmp_path: Path) -> None:
    path = write_secret_env(tmp_path, {"MLFLOW_TRACKING_URI": URI})
    probe = "import os, sys; print(os.environ['MLFLOW_TRACKING_URI']); sys.exit(7)"
    env = {**os.environ, SECRET_ENV_FILE_VAR: str(path)}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(wrapped((sys.executable, "-c", probe)), env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout.strip()) == (7, URI), proc.stderr
    path.unlink()  # unreadable: said on stderr, and the command still runs (its own error)
    proc = subprocess.run(wrapped((sys.executable, "-c", "print('ran')")), env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.strip() == "ran" and "cannot read the job's secrets" in proc.stderr
