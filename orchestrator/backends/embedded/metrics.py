"""The trainer's side of its run folder (:mod:`orchestrator.runs`), of MLflow (whose runs the
orchestrator owns) and of its progress display."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator import configuration
from orchestrator.runs.folder import METRICS_FILE, write_progress, write_summary
from orchestrator.runs.metrics import append_metrics, truncate_metrics
from orchestrator.runs.stop_request import StopRequest, stopped_block
from orchestrator.tracking.outbox import Outbox, OutboxSender


def mlflow_target(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """``(MLFLOW_RUN_ID, MLFLOW_TRACKING_URI)`` when both are set in ``environ`` (default:
    ``os.environ`` now): the run a launch logs to."""
    environ = os.environ if environ is None else environ
    run_id, uri = environ.get("MLFLOW_RUN_ID"), environ.get("MLFLOW_TRACKING_URI")
    return (run_id, uri) if run_id and uri else None


def mlflow_sender(outbox: Outbox, run_id: str, uri: str | None,
                  client: Any | None = None) -> OutboxSender:
    """A sender of ``outbox`` to the MLflow run ``run_id`` on ``uri`` (or through ``client``)."""
    if client is None:
        # Imported here, not first on the sender's thread: two threads importing
        # MLflow's modules (import cycles) for the first time at once can deadlock.
        import mlflow.entities  # noqa: F401
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
    return OutboxSender(outbox, run_id, client=client)


# Every metric the trainer logs, as globs (``*``: a benchmark's name, or ``k``): what a stop
# rule may watch (``Backend.known_metrics``). tests/integration/test_embedded_baselines.py
# checks every name each baseline logs against it.
LOGGED_METRICS = frozenset({
    "actor/entropy", "actor/entropy_loss", "actor/pg_loss", "actor/pg_clipfrac",
    "actor/pg_clipfrac_lower", "actor/ppo_kl", "actor/kl_loss", "actor/kl_coef",
    "actor/clipfrac_upper", "actor/clipfrac_lower", "actor/grad_norm", "actor/loss",
    "actor/kappa_eff", "critic/score/mean", "critic/score/max", "critic/score/min",
    "critic/acc/mean", "critic/advantages/mean", "critic/advantages/max",
    "critic/advantages/min", "response_length/mean", "response_length/clip_ratio",
    "batch/num_gen_batches", "batch/kept_groups", "timing_s/gen", "timing_s/update",
    "timing_s/step", "timing_s/warm_start", "perf/throughput", "warm_start/val_acc",
    "warm_start/steps", "warm_start/probe_acc", "val-core/*/acc/mean@1", "eval/*/greedy@1",
    "eval/*/mean@*", "eval/*/pass@*"})

# The step metrics a progress line shows, and how it names them.
PROGRESS_METRICS = (("critic/score/mean", "score"), ("critic/acc/mean", "acc"),
                    ("actor/entropy", "entropy"))


def progress_line(done: int, total: int, metrics: Mapping[str, float],
                  now: datetime | None = None) -> str:
    """One step's line for a log: time, ``step done/total``, then score, accuracy, entropy
    and any validation accuracy the step logged (metrics it lacks are left out)."""
    stamp = (now or datetime.now()).isoformat(sep=" ", timespec="seconds")
    shown = [f"{name} {metrics[key]:.3f}" for key, name in PROGRESS_METRICS if key in metrics]
    shown += [f"val acc {value:.3f}" for key, value in metrics.items()
              if key.startswith("val-core/")]
    return "  ".join([f"[kappa] {stamp} step {done}/{total}", *shown])


@contextmanager
def progress_display(total: int, done: int,
                     bar: bool) -> Iterator[Callable[[int, dict[str, float]], None]]:
    """Yields ``advance(done, metrics)``: a rich progress bar (``bar``), else a flushed
    :func:`progress_line` every few steps, at the last and at each validated step."""
    if not bar:
        every = max(1, total // 100)  # every step, or about 100 lines for a long run

        def line(step: int, metrics: dict[str, float]) -> None:
            if step % every == 0 or step == total or any(k.startswith("val-core/")
                                                         for k in metrics):
                print(progress_line(step, total, metrics), flush=True)

        yield line
        return
    from rich.progress import Progress

    with Progress(transient=True) as progress:
        task_id = progress.add_task("RL steps", total=total, completed=done)

        def advance(step: int, metrics: dict[str, float]) -> None:
            score = metrics.get("critic/score/mean", float("nan"))
            progress.update(task_id, completed=step, description=f"RL steps  score {score:.3f}")

        yield advance


class RunFiles:
    """Writes one run folder's metrics, progress and summary; with :func:`mlflow_target` set,
    each record also goes to its MLflow outbox, sent in the background exactly once across
    resumes (training never waits on, or dies of, a tracking server that is away)."""

    def __init__(self, out_dir: Path, total_steps: int) -> None:
        self.out_dir = out_dir
        self.total_steps = total_steps
        self.metrics_path = out_dir / METRICS_FILE
        target = mlflow_target()
        self._sender = None if target is None else mlflow_sender(Outbox(out_dir), *target)
        self._seq = 0  # position of the next record in the run's record sequence

    def resume_from(self, last_step: int) -> None:
        """Forget the lines a resume from ``last_step`` redoes (``-1``: a fresh start); queue
        kept lines no earlier attempt queued (the outbox skips records it holds)."""
        kept = truncate_metrics(self.metrics_path, last_step)
        self._seq = len(kept)
        if self._sender is not None:
            outbox = self._sender.outbox
            for seq in range(outbox.length(), len(kept)):
                row = json.loads(kept[seq])
                outbox.put(seq, int(row["step"]), row["metrics"])
            self._sender.wake()

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Append one step's metrics; queue the finite ones for MLflow."""
        clean = append_metrics(self.metrics_path, step, metrics)
        if self._sender is not None:
            self._sender.outbox.put(self._seq, step, clean)
            self._sender.wake()
        self._seq += 1

    def close(self, timeout: float | None = None) -> bool:
        """Give MLflow up to ``timeout`` s (default ``KAPPA_METRICS_FLUSH_SECONDS``); whether
        everything was delivered (the run's finisher sends the rest)."""
        if self._sender is None:
            return True
        return self._sender.close(configuration.read("KAPPA_METRICS_FLUSH_SECONDS")
                                  if timeout is None else timeout)

    def progress(self, step: int) -> None:
        """Record how far training got."""
        write_progress(self.out_dir, step, self.total_steps)

    def summary(self, steps: int, final: Mapping[str, float],
                stopped: StopRequest | None = None) -> None:
        """Record success (or, stopped on a request, its outcome) and the final metrics."""
        data: dict[str, Any] = {"status": stopped.outcome if stopped else "succeeded",
                                "steps": steps, "final": {k: float(v) for k, v in final.items()}}
        if stopped is not None:
            data["stopped"] = stopped_block(stopped, steps)
        write_summary(self.out_dir, data)
