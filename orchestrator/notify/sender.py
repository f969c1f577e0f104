"""Posting messages off the scheduler's path: a queue and one worker thread.

:meth:`Notifier.send` only enqueues (a full queue drops the message, logged), so the loop never
waits for a webhook. The worker claims each message's key (at most once across restarts), then POSTs
it with a timeout, retrying with a growing pause while the endpoint fails or does not answer.
:meth:`Notifier.close` waits a bounded time for what is queued, then leaves the rest to the daemon
thread, which dies with the process. Nothing it logs quotes the URL unmasked.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request

from orchestrator.notify.messages import Message
from orchestrator.notify.store import SentLog
from orchestrator.scheduler.options import env_seconds
from orchestrator.spec.notify_block import mask_url

LOG = logging.getLogger(__name__)
ATTEMPTS = 3
QUEUE_SIZE = 256
_STOP = object()


class Notifier:
    """Sends one sweep's messages to one URL, in the background."""

    def __init__(self, url: str, sent: SentLog, *, timeout: float | None = None,
                 exit_wait: float | None = None, backoff: float = 1.0) -> None:
        self.url = url
        self.sent = sent
        #: seconds one POST may take (``KAPPA_NOTIFY_TIMEOUT``, default 5)
        self.timeout = timeout if timeout is not None else env_seconds(
            "KAPPA_NOTIFY_TIMEOUT", 5.0)
        #: seconds :meth:`close` waits for queued messages (``KAPPA_NOTIFY_WAIT``, default 10)
        self.exit_wait = exit_wait if exit_wait is not None else env_seconds(
            "KAPPA_NOTIFY_WAIT", 10.0)
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
            except urllib.error.HTTPError as exc:
                why = f"HTTP {exc.code}"
                # A 4xx (but "too many requests") refuses this message: trying again won't do.
                final = 400 <= exc.code < 500 and exc.code != 429
            except (OSError, ValueError) as exc:  # refused, unreachable, timed out
                why, final = type(exc).__name__, False
            if final or attempt >= ATTEMPTS:
                LOG.warning("notification %s to %s not sent after %d attempt(s): %s",
                            message.kind, mask_url(self.url), attempt, why)
                return
            time.sleep(self.backoff * 2 ** (attempt - 1))
