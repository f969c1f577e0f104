"""``python -m orchestrator.backends.verl.run_phases <run_dir> --settings-json <json>``: a verl
cell's process. Runs its pending phases in turn (docs/verl.md#launch-and-phases), keeping the
run-folder files up to date from verl's file log and feeding ``MLFLOW_RUN_ID`` (:mod:`.logs`)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from orchestrator import configuration
from orchestrator.backends.verl import logs
from orchestrator.backends.verl.command import (
    Phase,
    checkpointed_step,
    eval_marker,
    pending_phases,
    phase_env,
    verl_command,
)
from orchestrator.backends.verl.settings import VerlSettings
from orchestrator.errors import UserInputError

# Put on verl's command line for its Ray workers, which do not inherit them on a remote
# cluster (for plug-ins and user code there: verl does not log to MLflow itself).
FORWARDED_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID")


def _log_path(run_dir: Path, phase: Phase) -> Path:
    folder = run_dir / logs.LOG_DIR
    folder.mkdir(parents=True, exist_ok=True)
    attempt = len(list(folder.glob(f"{phase.index}-*.jsonl")))
    return folder / f"{phase.index}-{phase.name}-{attempt:03d}.jsonl"


def forwarded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The set :data:`FORWARDED_ENV` variables, less any carrying a password (anyone on the
    machine can read a command line): workers get those by inheritance, or in a Ray job from
    its secrets file (:mod:`orchestrator.executors.job_secrets`), which the plug-in loads."""
    from orchestrator.redact import has_credentials

    return {k: environ[k] for k in FORWARDED_ENV
            if environ.get(k) and not has_credentials(environ[k])}


def run_phase(settings: VerlSettings, run_dir: Path, phase: Phase,
              feed: logs.MetricsFeed | None = None) -> int:
    """Run one phase's verl command, queueing its metrics into ``feed``; its exit code."""
    logger = {"VERL_FILE_LOGGER_PATH": str(_log_path(run_dir, phase))}
    argv = verl_command(settings, run_dir, phase=phase,
                        forward_env=forwarded_env(os.environ) | logger)
    env = dict(os.environ) | phase_env(settings, phase) | logger
    poll = configuration.read("KAPPA_VERL_POLL_SECONDS")  # refresh progress, queue metrics
    print(f"[kappa] phase {phase.index} ({phase.name}): steps {phase.start_step}.."
          f"{phase.end_step}", flush=True)
    proc = subprocess.Popen(argv, env=env, cwd=run_dir)
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: proc.send_signal(signum))
    try:
        while proc.poll() is None:
            time.sleep(poll)
            _refresh(settings, run_dir, feed)
    finally:
        signal.signal(signal.SIGTERM, previous)
    _refresh(settings, run_dir, feed)
    return proc.returncode


def _refresh(settings: VerlSettings, run_dir: Path, feed: logs.MetricsFeed | None) -> None:
    logs.write_run_files(run_dir, settings.max_steps, checkpointed_step(run_dir))
    if feed is not None:
        feed.pump()


def record_provenance(run_dir: Path) -> None:
    """This attempt's provenance: the backend's numerics, verl, vLLM, torch and CUDA."""
    from orchestrator.backends.verl.backend import VerlBackend
    from orchestrator.runs import provenance

    numerics = VerlBackend().numerics() | provenance.library_versions("verl", "vllm", "torch")
    try:
        import torch  # the GPUs and CUDA version are torch's to tell

        numerics["cuda"] = str(torch.version.cuda)
    except ImportError:
        pass
    provenance.write(run_dir, numerics)


def run(settings: VerlSettings, run_dir: Path) -> int:
    """Run every pending phase; 0 once the cell reached ``max_steps``. Metrics go to MLflow
    through the run folder's outbox, with a bounded wait at the end."""
    run_dir = run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    record_provenance(run_dir)
    feed = logs.feed_from_env(run_dir)
    try:
        _refresh(settings, run_dir, feed)  # queues what a killed earlier driver did not
        for phase in pending_phases(settings, run_dir):
            code = run_phase(settings, run_dir, phase, feed)
            if code != 0:
                print(f"[kappa] phase {phase.index} failed with exit code {code}", flush=True)
                return code
            if phase.evaluation:
                eval_marker(run_dir).write_text(json.dumps({"step": settings.max_steps}))
                continue
            reached = checkpointed_step(run_dir)
            if reached < phase.end_step:
                print(f"[kappa] phase {phase.index} exited 0 but its checkpoint is at step "
                      f"{reached}, not {phase.end_step}; is trainer.save_freq > 0?", flush=True)
                return 1
        logs.write_final_summary(run_dir, settings.max_steps)
        return 0
    finally:
        if feed is not None:
            feed.close()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m orchestrator.backends.verl.run_phases")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--settings-json", required=True)
    args = parser.parse_args(argv)
    try:  # every variable, before anything runs (as every kappa command does)
        configuration.check_environment()
    except UserInputError as exc:
        print(f"error: {exc.render()}", file=sys.stderr, flush=True)
        return UserInputError.exit_code
    # The scheduler that launched this validated nothing: validate as a submit did.
    return run(VerlSettings.model_validate(json.loads(args.settings_json)), args.run_dir)


if __name__ == "__main__":
    sys.exit(main())
