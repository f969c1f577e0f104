"""The stop request: ``<run_dir>/stop-request.json``, how a cell is asked to end early.

The scheduler writes it (atomically) when a stopping rule fires or a pruner prunes;
a process that honours it (the embedded trainer) ends its run cleanly at the next step
boundary: a checkpoint, the final evaluation, ``summary.json`` with
``"stopped": {...the request..., "at_step": N}``, exit 0. The file is also the record of
the decision: a scheduler that restarts reads the cell's outcome from it, and it is
removed before the cell is launched again (a rerun or a retry starts unasked).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

STOP_REQUEST_FILE = "stop-request.json"

Outcome = Literal["succeeded", "failed"]


@dataclass(frozen=True)
class StopRequest:
    """Why and where a cell should stop, and how it then ends.

    ``rule`` names what decided (``plateau``, ``threshold``, ``diverged``, ``pruned``);
    ``step`` is the training step whose metrics decided; ``reason`` is the sentence
    shown to people (``plateau at step 340 (val-core/...)``); ``outcome`` is the cell's
    final state: ``succeeded`` (a finished result: plateau, threshold, pruned) or
    ``failed`` (diverged; never retried).
    """

    rule: str
    step: int
    reason: str
    outcome: Outcome = "succeeded"

    def as_json(self) -> dict[str, Any]:
        """The request as written to the file (and copied into ``summary.json``)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> StopRequest | None:
        """The request in ``data``, or ``None`` if it is not one."""
        if not isinstance(data, dict):
            return None
        try:
            outcome = str(data.get("outcome", "succeeded"))
            if outcome not in ("succeeded", "failed"):
                return None
            return cls(rule=str(data["rule"]), step=int(data["step"]),
                       reason=str(data["reason"]),
                       outcome="failed" if outcome == "failed" else "succeeded")
        except (KeyError, TypeError, ValueError):
            return None


def write_stop_request(run_dir: Path, request: StopRequest) -> None:
    """Write the request atomically (a reader sees all of it or nothing)."""
    path = run_dir / STOP_REQUEST_FILE
    tmp = run_dir / f".{STOP_REQUEST_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(request.as_json()))
    os.replace(tmp, path)


def read_stop_request(run_dir: Path) -> StopRequest | None:
    """The cell's pending or honoured stop request, if any."""
    try:
        return StopRequest.from_json(json.loads((run_dir / STOP_REQUEST_FILE).read_text()))
    except (OSError, ValueError):
        return None


def clear_stop_request(run_dir: Path) -> None:
    """Forget a request (before a new launch of the cell)."""
    (run_dir / STOP_REQUEST_FILE).unlink(missing_ok=True)


def stopped_block(request: StopRequest, at_step: int) -> dict[str, Any]:
    """``summary.json``'s ``"stopped"`` entry: the request and the step the run ended at."""
    return {**request.as_json(), "at_step": at_step}


def synthesize_summary(run_dir: Path, request: StopRequest, step: int | None,
                       final: dict[str, float] | None = None) -> dict[str, Any]:
    """Write ``summary.json`` for a run ended from outside on ``request``: ``final``
    (default: the last finite value of every metric in ``metrics.jsonl``) at ``step``
    (default: the last step logged). Status is the request's outcome."""
    from orchestrator.backends.run_metrics import METRICS_FILE, read_metrics_file

    if final is None:
        final = {}
        last = -1
        for row_step, values in read_metrics_file(run_dir / METRICS_FILE).rows:
            final.update({k: v for k, v in values.items() if math.isfinite(v)})
            last = max(last, row_step)
        step = last if step is None else step
    at = max(step or 0, 0)
    summary = {"status": request.outcome, "steps": at, "final": final,
               "stopped": stopped_block(request, at)}
    tmp = run_dir / ".summary.json.stopped.tmp"
    tmp.write_text(json.dumps(summary))
    os.replace(tmp, run_dir / "summary.json")
    return summary
