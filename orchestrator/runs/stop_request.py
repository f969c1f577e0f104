"""The stop request: ``<run_dir>/stop-request.json``, how a cell is asked to end early.

The scheduler writes it when a stopping rule fires or a pruner prunes; it is also the record of
that decision for a restarted scheduler, kept across a launch's attempts (a ``diverged`` one, a
final failure, goes only when the user queues the cell again). A process that honours it
(:class:`StopPoint`) records the step it will stop at (``at_step``: the requested step, or a later
one already logged), trains up to it if it resumed from earlier, and ends there cleanly: a
checkpoint, the final evaluation, ``summary.json`` with ``"stopped": {...the request...,
"at_step": N}``, exit 0 (:func:`confirms`). A job that dies on the way leaves the request
standing: the next attempt stops at the recorded step, with the numbers (and records, so MLflow
equals ``metrics.jsonl``) of a run never interrupted."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from orchestrator.runs.folder import (
    METRICS_FILE,
    OUTBOX_FILE,
    STOP_REQUEST_FILE,
    read_json,
    write_json,
    write_summary,
)
from orchestrator.runs.metrics import last_values

Outcome = Literal["succeeded", "failed"]
_TAIL_BYTES = 1 << 16  # of metrics.jsonl and the outbox: many records' worth


@dataclass(frozen=True)
class StopRequest:
    """Why and where a cell should stop, and how it then ends.

    ``rule``: what decided (``plateau``, ``threshold``, ``diverged``, ``pruned``);
    ``step``: the step whose metrics decided; ``reason``: the sentence shown to people
    (``plateau at step 340 (val-core/...)``); ``outcome``: ``succeeded`` (a finished
    result) or ``failed`` (diverged; never retried); ``at_step``: the step the run will
    stop at (``None`` until a run saw it); ``requested_at``: Unix seconds (for stop
    latency); ``met_by``: for a comparison group's stop (:mod:`orchestrator.stopping.groups`)
    the step by which every member had met the rule, ``step`` being the group's stop step."""

    rule: str
    step: int
    reason: str
    outcome: Outcome = "succeeded"
    at_step: int | None = None
    requested_at: float | None = None
    met_by: int | None = None

    @property
    def grouped(self) -> bool:
        """Whether a comparison group made this request (its members share it)."""
        return self.met_by is not None

    def as_json(self) -> dict[str, Any]:
        """The request as written to the file (the fields not yet known left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: Any) -> StopRequest | None:
        """The request in ``data``, or ``None`` if it is not one."""
        outcome = data.get("outcome", "succeeded") if isinstance(data, dict) else None
        if outcome not in ("succeeded", "failed"):
            return None
        try:
            return cls(rule=str(data["rule"]), step=int(data["step"]), reason=str(data["reason"]),
                       outcome=outcome,
                       at_step=_optional(int, data.get("at_step")),
                       requested_at=_optional(float, data.get("requested_at")),
                       met_by=_optional(int, data.get("met_by")))
        except (KeyError, TypeError, ValueError):
            return None


def _optional(kind: type[int] | type[float], value: Any) -> Any:
    return None if value is None else kind(value)


def write_stop_request(run_dir: Path, request: StopRequest) -> None:
    """Write the request atomically (a reader sees all of it or nothing)."""
    write_json(run_dir / STOP_REQUEST_FILE, request.as_json())


def read_stop_request(run_dir: Path) -> StopRequest | None:
    """The cell's pending or honoured stop request, if any."""
    return StopRequest.from_json(read_json(run_dir / STOP_REQUEST_FILE))


# In a comparison group member's run folder: the path of the group's decision file (one
# write delivers the stop to every member, so a crash cannot leave some without it).
GROUP_POINTER = "stop-group"


def point_to_group(run_dir: Path, decision_file: Path) -> None:
    """Tell the launch in ``run_dir`` where its comparison group's decision will be."""
    (run_dir / GROUP_POINTER).write_text(str(decision_file), encoding="utf-8")


def read_group_request(run_dir: Path) -> StopRequest | None:
    """The decision of the run's comparison group, if it has one and it was made."""
    try:
        target = Path((run_dir / GROUP_POINTER).read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError):
        return None
    return StopRequest.from_json(read_json(target)) if target.name else None


def clear_stop_request(run_dir: Path) -> None:
    """Forget a request (a cell the user queued again starts unasked)."""
    (run_dir / STOP_REQUEST_FILE).unlink(missing_ok=True)


def stopped_block(request: StopRequest, at_step: int) -> dict[str, Any]:
    """``summary.json``'s ``"stopped"`` entry: the request and the step the run ended at."""
    return {"rule": request.rule, "step": request.step, "reason": request.reason,
            "outcome": request.outcome, "at_step": at_step}


def confirms(summary: Mapping[str, Any] | None, request: StopRequest) -> bool:
    """Whether ``summary`` reports that the run stopped on ``request`` at or after its
    step (the backend's confirmation; written after the final evaluation)."""
    if not isinstance(summary, Mapping) or not isinstance(
            stopped := summary.get("stopped"), Mapping):
        return False
    at = stopped.get("at_step")
    return (stopped.get("rule") == request.rule and stopped.get("step") == request.step
            and isinstance(at, int) and at >= request.step and summary.get("steps") == at
            and summary.get("status") == request.outcome)


def logged_through(run_dir: Path) -> int:
    """The last step the run folder holds a logged record of (``-1``: none): in ``metrics.jsonl`` or
    in the MLflow outbox, which a resume never shortens. Read it before a resume cuts
    ``metrics.jsonl`` back. Both files only ever grow in step order, so their tails are enough."""
    last = -1
    for path in (run_dir / METRICS_FILE, run_dir / OUTBOX_FILE):
        try:
            with open(path, "rb") as fh:
                fh.seek(max(0, fh.seek(0, 2) - _TAIL_BYTES))
                tail = fh.read().splitlines()
        except OSError:
            continue
        for line in tail:
            try:
                last = max(last, int(json.loads(line)["step"]))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a kill, or by the tail's start
    return last


@dataclass
class StopPoint:
    """A training process's side of the stop request. ``reached``: the last step an earlier
    attempt logged (:func:`logged_through`, read before the resume). :meth:`due`, asked at every
    step boundary, records the stop step in the first request it finds, never below what was
    logged (so a resumed attempt logs the same records), then says whether it is reached."""

    run_dir: Path
    reached: int = -1
    request: StopRequest | None = None

    def due(self, done: int) -> bool:
        """Whether the run, ``done`` steps in, must stop now."""
        if self.request is None:
            found = read_stop_request(self.run_dir) or read_group_request(self.run_dir)
            if found is None:
                return False
            at = max(found.step, self.reached, done)
            if found.at_step is not None:  # an earlier attempt's promise stands
                at = max(found.at_step, found.step)
            self.request = replace(found, at_step=at)
            if found.at_step != at:
                write_stop_request(self.run_dir, self.request)
        assert self.request.at_step is not None
        return done >= self.request.at_step


def synthesize_summary(run_dir: Path, request: StopRequest, step: int | None,
                       final: dict[str, float] | None = None) -> dict[str, Any]:
    """Write ``summary.json`` (status: the request's outcome) for a run ended from outside on
    ``request``: ``final`` at ``step``, by default the last finite value of every metric in
    ``metrics.jsonl`` at the last step logged there, whatever ``step`` says (a progress file
    read a moment apart may lag or lead the metrics by a step)."""
    if final is None:
        final, last = last_values(run_dir / METRICS_FILE)
        step = last if last >= 0 else step
    at = max(step or 0, 0)
    summary = {"status": request.outcome, "steps": at, "final": final,
               "stopped": stopped_block(request, at)}
    write_summary(run_dir, summary)
    return summary
