"""Exactly-once metric delivery to MLflow, through a file outbox in the run folder.

A training process appends each record (one step's metrics) to the outbox with its
position and the timestamp it will carry; a sender (a thread of the trainer; at the end,
whoever finishes the run) delivers it in order, recording how many records the run has::

    mlflow-outbox.jsonl  {"seq": int, "step": int, "ts": int (ms), "metrics": {name: float},
                          "origin"?: str}   # origin: the queuer's own note, not sent
    mlflow-sent.json     {"run_id": str, "sent": int}   # records 0 .. sent-1 are in MLflow

A redone step's record is not queued again, and a sender killed mid-call resends with
the *same* timestamps, which MLflow's SQL stores drop (docs/reliability.md). Senders take
turns through a lock; MLflow is imported on first send only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.runs.atomic import file_lock
from orchestrator.runs.folder import (
    OUTBOX_FILE,
    OUTBOX_LOCK_FILE,
    OUTBOX_SENT_FILE,
    read_json,
    write_json,
)
from orchestrator.tracking.naming import metric_key

LOG = logging.getLogger(__name__)

MAX_METRICS_PER_CALL = 1000  # MLflow's per-call limit for log_batch


def log_metrics(client: Any, run_id: str, metrics: list[Any]) -> None:
    """``client.log_batch`` the ``metrics`` of ``run_id``, in calls MLflow accepts."""
    for start in range(0, len(metrics), MAX_METRICS_PER_CALL):
        client.log_batch(run_id, metrics=metrics[start:start + MAX_METRICS_PER_CALL])


def _read_lines(path: Path) -> list[str]:
    """Complete lines of ``path`` (a line cut short by a kill is not a line)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [line for line in text.split("\n")[:-1] if line]  # after the last newline: cut


class Outbox:
    """The outbox of one run folder (see the module docstring)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / OUTBOX_FILE
        self._length: int | None = None

    def length(self) -> int:
        """How many records the outbox holds (read once, then counted); a last line that a
        kill left without its newline is cut first."""
        if self._length is None:
            with contextlib.suppress(FileNotFoundError), open(self.path, "rb+") as fh:
                data = fh.read()
                if data and not data.endswith(b"\n"):
                    fh.truncate(data.rfind(b"\n") + 1)
            self._length = len(_read_lines(self.path))
        return self._length

    def put(self, seq: int, step: int, metrics: Mapping[str, float],
            origin: str | None = None) -> bool:
        """Queue record ``seq`` unless the outbox has it already (a redone step); whether
        it was queued. Records must come in order: ``seq`` is at most :meth:`length`.
        ``origin`` (kept in the record, not sent) says where a queuer took it from."""
        have = self.length()
        if seq < have:
            return False
        if seq > have:
            raise ValueError(f"outbox of {self.run_dir} has {have} records; cannot queue #{seq}")
        record: dict[str, object] = {"seq": seq, "step": step, "ts": int(time.time() * 1000),
                                     "metrics": dict(metrics)}
        if origin is not None:
            record["origin"] = origin
        with open(self.path, "a") as fh:
            fh.write(json.dumps(record) + "\n")
        self._length = have + 1
        return True

    def sent(self, run_id: str) -> int:
        """How many records ``run_id`` has (0 for a run the ledger does not name)."""
        data = read_json(self.run_dir / OUTBOX_SENT_FILE) or {}
        sent = data.get("sent") if data.get("run_id") == run_id else None
        return sent if isinstance(sent, int) and sent >= 0 else 0

    def _record_sent(self, run_id: str, sent: int) -> None:
        write_json(self.run_dir / OUTBOX_SENT_FILE, {"run_id": run_id, "sent": sent})

    def deliver(self, client: Any, run_id: str) -> int:
        """Send every unsent record to ``run_id`` with ``client`` (an ``MlflowClient``), in
        order, recording progress after each accepted call; how many were sent. MLflow's
        exceptions propagate (what was confirmed stays confirmed)."""
        from mlflow.entities import Metric

        with file_lock(self.run_dir / OUTBOX_LOCK_FILE):
            first = sent = self.sent(run_id)
            batch: list[Metric] = []
            for line in _read_lines(self.path)[sent:]:
                row = json.loads(line)
                metrics = [Metric(metric_key(k), float(v), int(row["ts"]), int(row["step"]))
                           for k, v in row["metrics"].items()]
                if batch and len(batch) + len(metrics) > MAX_METRICS_PER_CALL:
                    log_metrics(client, run_id, batch)
                    self._record_sent(run_id, sent)
                    batch = []
                batch.extend(metrics)
                sent = int(row["seq"]) + 1
            if sent > first:
                log_metrics(client, run_id, batch)
                self._record_sent(run_id, sent)
        return sent - first


class OutboxSender:
    """A daemon thread delivering an :class:`Outbox` while training goes on (:meth:`wake`
    it after each record); failures are retried with backoff, never raised into training."""

    def __init__(self, outbox: Outbox, run_id: str, client: Any | None = None,
                 max_backoff: float = 30.0) -> None:
        self.outbox = outbox
        self.run_id = run_id
        self.max_backoff = max_backoff
        self.failures = 0
        self._client = client
        # Wakes are numbered; a delivery that started after wake n covers it.
        self._cond = threading.Condition()
        self._requested = 0
        self._covered = 0
        self._stopping = False
        threading.Thread(target=self._loop, name="kappa-metrics", daemon=True).start()

    def _get_client(self) -> Any:
        if self._client is None:
            from mlflow.tracking import MlflowClient

            # The environment's URI, not MLflow's process-wide default (which code in
            # the same process may have set to another store).
            self._client = MlflowClient(tracking_uri=os.environ.get("MLFLOW_TRACKING_URI"))
        return self._client

    def wake(self) -> None:
        """There is something new to send."""
        with self._cond:
            self._requested += 1
            self._cond.notify_all()

    def _loop(self) -> None:
        backoff = 0.5
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or self._requested > self._covered)
                if self._stopping:
                    return
                target = self._requested
            try:
                self.outbox.deliver(self._get_client(), self.run_id)
            except Exception as exc:  # a store that is away: keep the records, try later
                self.failures += 1
                if self.failures == 1 or self.failures % 20 == 0:
                    LOG.warning("MLflow did not take the metrics (%s); they wait in %s",
                                (str(exc).splitlines() or [""])[0][:200], self.outbox.path)
                with self._cond:
                    self._cond.wait_for(lambda: self._stopping, timeout=backoff)
                backoff = min(backoff * 2, self.max_backoff)
                continue
            backoff = 0.5
            with self._cond:
                self._covered = max(self._covered, target)
                self._cond.notify_all()

    def close(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for everything queued to be sent; whether it was."""
        self.wake()
        with self._cond:
            target = self._requested
            drained = self._cond.wait_for(lambda: self._covered >= target, timeout=timeout)
            self._stopping = True
            self._cond.notify_all()
        return drained
