"""A background scheduler: ``kappa resume SWEEP --wait`` detached from this process, its
output (one line per launch, retry, stop and end: :func:`log_events_to_stderr`) in its log."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

from orchestrator import configuration, paths
from orchestrator.executors import OPTIONS_ENV
from orchestrator.runs.layout import scheduler_log
from orchestrator.sweeps.executor_choice import ExecutorChoice
from orchestrator.sweeps.stores import Stores


def start_background(sweep: str, stores: Stores = Stores(),
                     max_parallel: int | None = None,
                     choice: ExecutorChoice | None = None) -> int:
    """Start ``kappa resume SWEEP --wait --log-events`` detached from this process, logging
    to :func:`scheduler_log`; its pid. It waits for (or takes over from) any scheduler
    already driving the sweep, on the executor ``choice``. URLs and options (any may carry
    a password) go through its environment, never its command line, which ``ps`` shows.
    ``kappa`` is ``KAPPA_CLI`` (split like a shell would; a wrapper that registers extra
    backends starts schedulers that know them too), else ``python -m orchestrator``.
    """
    log = scheduler_log(paths.check_name(sweep))
    log.parent.mkdir(parents=True, exist_ok=True)
    kappa = configuration.read("KAPPA_CLI") or [sys.executable, "-m", "orchestrator"]
    argv = [*kappa, "resume", sweep, "--wait", "--quiet", "--log-events"]
    env = {**os.environ, "KAPPA_HOME": str(paths.kappa_home()), **stores.env()}
    env.pop(OPTIONS_ENV, None)  # only this choice's options, never inherited ones
    if max_parallel is not None:
        argv += ["--max-parallel", str(max_parallel)]
    if choice is not None:
        argv += choice.cli_args()
        env.update(choice.env())
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)
    return proc.pid


def log_events_to_stderr() -> None:
    """Send kappa's log records from INFO up to stderr, one timestamped line each: what the
    scheduler launched, retried, stopped and ended (a detached scheduler's stderr is its
    log; without this, records under WARNING went nowhere and its log stayed empty)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    kappa = logging.getLogger("orchestrator")
    kappa.addHandler(handler)
    kappa.setLevel(logging.INFO)
