"""A sweep's scheduler built in the test's process, stepped by the test (no lease loop):
the real registry, local executor and MLflow tracker, polling fast."""

from __future__ import annotations

from orchestrator.backends import get_backend
from orchestrator.executors.local import LocalExecutor
from orchestrator.registry import Registry
from orchestrator.scheduler.loop import SweepScheduler
from orchestrator.scheduler.mlflow_runs import MlflowRunTracker
from orchestrator.scheduler.options import SchedulerOptions
from orchestrator.sweeps.driver import build_scheduler


def in_process_scheduler(sweep: str, max_parallel: int | None = None) -> SweepScheduler:
    """The scheduler of the recorded ``sweep`` (``max_parallel``: the executor's and the
    scheduler's limit; ``None``: their defaults)."""
    with Registry.open() as reg:
        record = reg.get_sweep(sweep)
    return build_scheduler(Registry.open(), record, get_backend(record.backend),
                           LocalExecutor(max_parallel=max_parallel),
                           MlflowRunTracker(background=False),
                           SchedulerOptions(poll_interval=0.05, max_parallel=max_parallel))
