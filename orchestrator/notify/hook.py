"""Notifications as a scheduler hook: it posts what the sweep's ``notify.json`` asks for when a
cell fails for good and when the sweep has nothing left to run. A failure of its own is logged,
never raised: notifications cannot change how a sweep runs or ends. A failed cell of a canary sweep
is a ``canary_failed`` message, one failed by a ``diverged`` rule a ``diverged`` one (not also
``cell_failed``); a canary sweep's own end is not reported.

Posting is off the scheduler's path, through a queue and one worker thread: :meth:`Notifier.send`
only enqueues (a full queue drops the message, logged), so the loop never waits for a webhook. The
worker claims each message's key (at most once across restarts), then POSTs it with a timeout.
Each message is delivered at most once (a chat webhook de-duplicates nothing): it is sent again,
after a growing pause, only when it certainly did not arrive: no connection was made or the request
could not be sent, or the endpoint answered 429 or 503 (not taken, try later). A request sent but
not answered in time may have arrived, so it is not sent again (logged). :meth:`Notifier.close`
waits a bounded time for what is queued, then leaves the rest to the daemon thread, which dies with
the process. Nothing it logs quotes the URL unmasked."""

from __future__ import annotations

import http.client
import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from orchestrator import configuration
from orchestrator.notify.messages import EndedSweep, Message, cell_failed, sweep_end
from orchestrator.notify.store import SentLog, load_config
from orchestrator.paths import is_canary_sweep
from orchestrator.registry import CellState, Registry
from orchestrator.scheduler.hooks import SchedulerHook
from orchestrator.spec.notify_block import Event, NotifySpec, mask_url

LOG = logging.getLogger(__name__)
ATTEMPTS = 3
NOT_TAKEN = (429, 503)  # answers that say the message was not taken: sent again later
QUEUE_SIZE = 256
_STOP = object()


class Notifier:
    """Sends one sweep's messages to one URL, in the background."""

    def __init__(self, url: str, sent: SentLog, *, timeout: float | None = None,
                 exit_wait: float | None = None, backoff: float = 1.0) -> None:
        self.url = url
        self.sent = sent
        #: seconds one POST may take (``KAPPA_NOTIFY_TIMEOUT``, default 5)
        self.timeout = configuration.read("KAPPA_NOTIFY_TIMEOUT") if timeout is None else timeout
        #: seconds :meth:`close` waits for queued messages (``KAPPA_NOTIFY_WAIT``, default 10)
        self.exit_wait = configuration.read("KAPPA_NOTIFY_WAIT") if exit_wait is None else exit_wait
        self.backoff = backoff
        self._queue: queue.Queue[object] = queue.Queue(QUEUE_SIZE)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.delivered: list[str] = []  # keys posted (a 2xx answer), for tests and logs

    def send(self, message: Message) -> None:
        """Queue ``message`` (once per key: one already begun is skipped by the worker)."""
        self._start()
        try:
            self._queue.put_nowait(message)
        except queue.Full:
            LOG.warning("notification %s dropped: %d messages wait for %s", message.kind,
                        QUEUE_SIZE, mask_url(self.url))

    def close(self) -> None:
        """Wait up to ``exit_wait`` seconds for the queued messages to be sent."""
        if self._thread is None:
            return
        try:
            self._queue.put(_STOP, timeout=self.exit_wait)
        except queue.Full:
            return
        self._thread.join(self.exit_wait)
        if self._thread.is_alive():
            LOG.warning("notifications to %s not finished after %.0f s; left behind",
                        mask_url(self.url), self.exit_wait)
        self._thread = None

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="kappa-notify",
                                                daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP or not isinstance(item, Message):
                return
            try:
                if self.sent.claim(item.key):
                    self._post(item)
            except Exception as exc:  # a notification never takes the scheduler down
                LOG.warning("notification %s not sent: %s", item.kind, type(exc).__name__)

    def _post(self, message: Message) -> None:
        body = json.dumps(message.payload()).encode()
        for attempt in range(1, ATTEMPTS + 1):
            request = urllib.request.Request(
                self.url, data=body, method="POST",
                headers={"Content-Type": "application/json", "User-Agent": "kappa"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                    answer.read(1024)
                self.delivered.append(message.key)
                return
            except urllib.error.HTTPError as exc:  # answered: only "not now" was not taken
                why, final = f"HTTP {exc.code}", exc.code not in NOT_TAKEN
            except urllib.error.URLError as exc:  # urllib's error before the request was sent
                why, final = type(exc.reason).__name__, False
            except (OSError, ValueError, http.client.HTTPException) as exc:
                # Sent, then no (readable) answer: it may have arrived; never twice.
                why, final = f"{type(exc).__name__} after the request was sent", True
            if final or attempt >= ATTEMPTS:
                LOG.warning("notification %s to %s not sent after %d attempt(s): %s",
                            message.kind, mask_url(self.url), attempt, why)
                return
            time.sleep(self.backoff * 2 ** (attempt - 1))


class NotifyHook(SchedulerHook):
    """Posts one sweep's messages (module docstring)."""

    def __init__(self, sweep: str, config: NotifySpec,
                 status: Callable[[Registry], EndedSweep],
                 notifier: Notifier | None = None) -> None:
        self.sweep = sweep
        self.config = config
        self.status = status
        self.notifier = notifier or Notifier(config.url, SentLog(sweep))

    @classmethod
    def of(cls, sweep: str, status: Callable[[Registry], EndedSweep]) -> NotifyHook | None:
        """The hook for ``sweep`` if it has notifications (``None`` otherwise); ``status``
        reads the sweep's complete status (its handle's), which the end message reports."""
        config = load_config(sweep)
        return None if config is None else cls(sweep, config, status)

    def on_cell_end(self, registry: Registry, cell_id: str, status: str) -> None:
        """A cell's run ended: a failure with no retry left is posted."""
        if status != "FAILED":
            return
        try:
            cell = registry.get_cell(self.sweep, cell_id)
            if cell.state is not CellState.FAILED or cell.retries_left > 0:
                return
            kind: Event = ("diverged" if (cell.stop_reason or "").startswith("diverged")
                           else "canary_failed" if is_canary_sweep(self.sweep)
                           else "cell_failed")
            if kind in self.config.events:
                self.notifier.send(cell_failed(self.sweep, cell, kind))
        except Exception as exc:
            LOG.warning("no notification for cell %s: %s", cell_id, exc)

    def on_sweep_end(self, registry: Registry) -> None:
        """The sweep has nothing left to run: post its end, then wait (bounded) for the queue."""
        try:
            if "sweep_end" in self.config.events and not is_canary_sweep(self.sweep):
                self.notifier.send(sweep_end(self.status(registry)))
        except Exception as exc:
            LOG.warning("no end-of-sweep notification for %s: %s", self.sweep, exc)
        finally:
            self.notifier.close()
