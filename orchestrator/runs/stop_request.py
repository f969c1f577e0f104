"""The stop request: ``<run_dir>/stop-request.json``, how a cell is asked to end early.

The scheduler writes it (atomically) when a stopping rule fires or a pruner prunes;
a process that honours it (the embedded trainer) ends its run cleanly at the next step
boundary: a checkpoint, the final evaluation, ``summary.json`` with
``"stopped": {...the request..., "at_step": N}``, exit 0. The file is also the record of
the decision: a scheduler that restarts reads the cell's outcome from it, and it is
removed before the cell is launched again (a rerun or a retry starts unasked).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from orchestrator.runs.folder import (
    METRICS_FILE,
    STOP_REQUEST_FILE,
    read_json,
    write_json,
    write_summary,
)
from orchestrator.runs.metrics import last_values

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
    write_json(run_dir / STOP_REQUEST_FILE, request.as_json())


def read_stop_request(run_dir: Path) -> StopRequest | None:
    """The cell's pending or honoured stop request, if any."""
    return StopRequest.from_json(read_json(run_dir / STOP_REQUEST_FILE))


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
    if final is None:
        final, last = last_values(run_dir / METRICS_FILE)
        step = last if step is None else step
    at = max(step or 0, 0)
    summary = {"status": request.outcome, "steps": at, "final": final,
               "stopped": stopped_block(request, at)}
    write_summary(run_dir, summary)
    return summary
