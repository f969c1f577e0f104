"""The messages kappa posts, in Slack's incoming-webhook shape: ``text`` (what every chat
tool shows) and ``blocks`` (the same text, and fields). Every text is redacted (a cell's
last error may quote a URL with a password).

Each message's ``key`` names what it reports, so that it is sent at most once
(:class:`orchestrator.notify.store.SentLog`): a cell's failure is keyed by its attempts,
a sweep's end by every cell's state and attempts (a resubmit that adds or reruns cells
ends the sweep anew; resuming an ended sweep does not)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from orchestrator.redact import one_line, redact
from orchestrator.registry import CellRecord
from orchestrator.spec.notify_block import Event


class EndedCell(Protocol):
    """What a sweep-end message reads of a cell (a ``CellStatus`` fits)."""

    @property
    def cell_id(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def axes(self) -> Mapping[str, Any]: ...
    @property
    def state(self) -> str: ...
    @property
    def attempts(self) -> int: ...
    @property
    def final_metrics(self) -> Mapping[str, Any]: ...


class EndedSweep(Protocol):
    """What a sweep-end message reads of the sweep: its complete status (a ``SweepStatus``,
    which the sweep's handle makes: :mod:`orchestrator.sweeps`)."""

    @property
    def sweep(self) -> str: ...
    @property
    def counts(self) -> Mapping[str, int]: ...
    @property
    def cells(self) -> Sequence[EndedCell]: ...
    @property
    def hours(self) -> Any: ...  # SweepHours (unit, used) or None
    @property
    def made_by(self) -> str: ...  # the numerics and code behind its numbers ("" unknown)

MAX_ERROR = 300  # characters of a cell's last error quoted in a message


@dataclass(frozen=True)
class Message:
    """One message: its kind (a ``notify.events`` event), its key, its text and fields."""

    kind: Event
    key: str
    text: str
    fields: tuple[tuple[str, str], ...] = field(default=())

    def payload(self) -> dict[str, Any]:
        """The JSON body to POST (Slack's incoming-webhook shape), its text escaped."""
        text = _shown(self.text)
        blocks: list[dict[str, Any]] = [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}}]
        if self.fields:
            blocks.append({"type": "section", "fields": [
                {"type": "mrkdwn", "text": f"*{_shown(title)}*\n{_shown(value)}"}
                for title, value in self.fields[:10]]})
        return {"text": text, "blocks": blocks}


def _shown(text: str) -> str:
    # Slack reads "<...>" as a command: "<!channel>" in an axis value or a log line would
    # page everyone, "<https://x|y>" would disguise a link. kappa's own text has no "<".
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def axes_text(cell: CellRecord | EndedCell) -> str:
    """``baseline=grpo, seed=1``."""
    return one_line(", ".join(f"{k}={v}" for k, v in cell.axes.items())) or "(no axes)"


def main_metric(final: Mapping[str, Any] | None) -> tuple[str, float] | None:
    """The cell's final validation accuracy (``val-core/<benchmark>/acc/mean@1``), else
    its first final evaluation metric (``eval/...``); ``None`` without either."""
    final = final or {}
    keys = sorted(final)
    for key in [k for k in keys if k.startswith("val-core/") and k.endswith("/acc/mean@1")
                ] + [k for k in keys if k.startswith("eval/")]:
        try:
            value = float(final[key])
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            return key, value
    return None


def cell_failed(sweep: str, cell: CellRecord, kind: Event) -> Message:
    """A cell failed for good (``cell_failed``, ``canary_failed`` or ``diverged``)."""
    first_line = next((x.strip() for x in (cell.last_error or "").splitlines() if x.strip()), "")
    why = one_line(redact((cell.stop_reason or "") if kind == "diverged" else first_line))
    why = why[:MAX_ERROR]
    if kind == "diverged":
        head = f"kappa: cell `{cell.cell_id}` of *{sweep}* diverged"
    elif kind == "canary_failed":
        head = (f"kappa: a canary of *{sweep.removesuffix('.canary')}* failed (cell "
                f"`{cell.cell_id}`); the grid is not submitted")
    else:
        attempts = f"{cell.attempts_count} attempt{'s' if cell.attempts_count != 1 else ''}"
        head = f"kappa: cell `{cell.cell_id}` of *{sweep}* failed for good after {attempts}"
    text = f"{head} ({axes_text(cell)})" + (f": {why}" if why else "")
    fields = (("sweep", sweep), ("cell", cell.cell_id), ("axes", axes_text(cell)),
              ("attempts", str(cell.attempts_count)), ("log", f"kappa logs {cell.cell_id}"))
    return Message(kind, f"{kind}:{cell.cell_id}:{cell.attempts_count}", text, fields)


def sweep_end(status: EndedSweep) -> Message:
    """The sweep has nothing left to run: counts, hours used, the best cell by its final
    validation accuracy (``status``: its complete status)."""
    cells = status.cells
    shown = " · ".join(f"{n} {state}" for state, n in status.counts.items() if n) or "no cells"
    text = f"kappa: sweep *{status.sweep}* ended: {shown} ({len(cells)} cells)"
    fields: list[tuple[str, str]] = [("sweep", status.sweep), ("cells", shown)]
    if status.hours is not None:
        fields.append((status.hours.unit, f"{status.hours.used:,.2f} used"))
    scored = [(found, c) for c in cells if c.state == "succeeded"
              and (found := main_metric(c.final_metrics)) is not None]
    if scored:  # cells compared on one metric: the validation accuracy where there is one
        metric = min({m[0] for m, _ in scored}, key=lambda k: (not k.startswith("val-core/"), k))
        (name, value), best = max((x for x in scored if x[0][0] == metric),
                                  key=lambda x: (x[0][1], -x[1].index))
        fields.append(("best cell", f"`{best.cell_id}` ({axes_text(best)}): "
                                    f"{name} = {value:.4f}"))
        text += f"; best {name} = {value:.4f} ({axes_text(best)})"
    if status.made_by:  # "1 environment (...)", or what differs among the runs
        fields.append(("made by", status.made_by))
    if status.counts.get("failed"):
        fields.append(("failed", f"kappa status {status.sweep}"))
    digest = hashlib.sha256("\n".join(
        f"{c.cell_id}:{c.state}:{c.attempts}" for c in
        sorted(cells, key=lambda c: c.cell_id)).encode()).hexdigest()[:16]
    return Message("sweep_end", f"sweep_end:{digest}", text, tuple(fields))
