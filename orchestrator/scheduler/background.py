"""Work the scheduler hands off its critical path: one worker thread, in order.

Ending a cell's MLflow run takes tens of milliseconds and nothing in the loop waits on
its result, so it runs on a worker thread while the loop launches the next cells. Tasks
carry a key (the run id) to wait for one run's tasks. A task that fails is logged and
dropped; the next scheduler's recovery redoes what it left undone.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable

LOG = logging.getLogger(__name__)

Task = tuple[str, Callable[[], object]]


class BackgroundWork:
    """Runs submitted callables one at a time, in submission order, on a daemon thread."""

    def __init__(self, name: str = "kappa-background") -> None:
        self.name = name
        self._queue: queue.Queue[Task] = queue.Queue()
        self._pending: Counter[str] = Counter()
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, key: str, task: Callable[[], object]) -> None:
        """Queue ``task`` (known by ``key``); the worker starts on first use."""
        with self._idle:
            self._pending[key] += 1
        if self._thread is None or not self._thread.is_alive():
            # Daemon: a scheduler that dies must not hang on it; recovery redoes the work.
            self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
            self._thread.start()
        self._queue.put((key, task))

    def wait_for(self, key: str) -> None:
        """Return once no task of ``key`` is queued or running."""
        with self._idle:
            self._idle.wait_for(lambda: self._pending[key] == 0)

    def flush(self) -> None:
        """Return once every task submitted so far has run."""
        with self._idle:
            self._idle.wait_for(lambda: not self._pending)

    def _work(self) -> None:
        while True:
            key, task = self._queue.get()
            try:
                task()
            except Exception as exc:  # logged and dropped; recovery redoes it
                LOG.warning("background task for %s failed: %s", key, exc)
            finally:
                with self._idle:
                    self._pending[key] -= 1
                    if self._pending[key] <= 0:
                        del self._pending[key]
                    self._idle.notify_all()
