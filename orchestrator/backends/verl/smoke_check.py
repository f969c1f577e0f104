"""Pass criteria of the verl smoke sweep (docs/verl.md#gpu-smoke-test): a cell passes when
it ended ``succeeded`` and its MLflow run holds the :data:`REQUIRED_METRICS` for every step
1..:data:`SMOKE_STEPS`, logged since the cell's last attempt started (less
:data:`CLOCK_SLACK_S` for other nodes' clocks: a rerun logs into the same run)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from orchestrator.registry import CellRecord, Registry

SMOKE_STEPS = 2
CLOCK_SLACK_S = 60
# metric -> whether it must be > 0 (else: merely present and finite)
REQUIRED_METRICS: Mapping[str, bool] = {"actor/pg_loss": False, "actor/grad_norm": True,
                                         "timing_s/gen": False}


@dataclass(frozen=True)
class CellVerdict:
    """One smoke cell's result: what it is, how it ended, what is wrong (nothing: passed)."""

    cell_id: str
    label: str
    state: str
    problems: tuple[str, ...]

    @property
    def passed(self) -> bool:
        """Whether the cell met every criterion."""
        return not self.problems


def metric_problems(history: Mapping[str, Mapping[int, float]]) -> list[str]:
    """What the logged ``history`` (metric -> step -> value) lacks, one line per miss."""
    problems = []
    for key, positive in REQUIRED_METRICS.items():
        values = history.get(key, {})
        if not values:
            problems.append(f"{key}: never logged")
            continue
        for step in range(1, SMOKE_STEPS + 1):
            value = values.get(step)
            if value is None:
                problems.append(f"{key}: no value at step {step}")
            elif not math.isfinite(value):
                problems.append(f"{key} = {value} at step {step} (not finite)")
            elif positive and value <= 0:
                problems.append(f"{key} = {value} at step {step} (must be > 0)")
    return problems


def run_history(client: MlflowClient, run_id: str,
                since_ms: int = 0) -> dict[str, dict[int, float]]:
    """Metric -> step -> last value of the required metrics logged at or after ``since_ms``."""
    history: dict[str, dict[int, float]] = {}
    for key in REQUIRED_METRICS:
        points = sorted((m for m in client.get_metric_history(run_id, key)
                         if m.timestamp >= since_ms), key=lambda m: (m.step, m.timestamp))
        history[key] = {m.step: m.value for m in points}
    return history


def check_cell(cell: CellRecord, client: MlflowClient) -> CellVerdict:
    """The verdict of one cell (see the module docstring)."""
    problems: list[str] = []
    if cell.state.value != "succeeded":
        detail = f" (exit code {cell.exit_code})" if cell.exit_code is not None else ""
        problems.append(f"ended {cell.state.value}{detail}, not succeeded; "
                        f"`kappa logs {cell.cell_id}` shows why")
    if not cell.mlflow_run_id:
        problems.append("no MLflow run recorded")
    else:
        try:
            since = (int(cell.started_at.timestamp() * 1000) - CLOCK_SLACK_S * 1000
                     if cell.started_at is not None else 0)
            history = run_history(client, cell.mlflow_run_id, since)
            problems += metric_problems(history)
            if all(set(values) == {SMOKE_STEPS} for values in history.values()):
                # Only kappa's end-of-run summary (last values, at the last step) arrived:
                # no step of verl's file log was sent to this run.
                problems.append(f"only step {SMOKE_STEPS}'s summary reached MLflow: verl's "
                                "file log never reached this run (VERL_FILE_LOGGER_PATH not "
                                "forwarded to its Ray workers, or the cell's log says "
                                "'MLflow has not taken all of this cell's metrics')")
        except Exception as exc:  # a missing or unreadable run is a verdict, not a crash
            problems.append(f"MLflow run {cell.mlflow_run_id} unreadable: "
                            f"{type(exc).__name__}: {str(exc)[:200]}")
    label = " ".join(f"{k}={v}" for k, v in cell.axes.items()) or cell.cell_id
    return CellVerdict(cell.cell_id, label, cell.state.value, tuple(problems))


def check_smoke(registry: Registry, client: MlflowClient, sweep: str) -> list[CellVerdict]:
    """Each cell of ``sweep`` checked against the pass criteria, in grid order."""
    return [check_cell(cell, client)
            for cell in sorted(registry.cells(sweep), key=lambda c: c.index)]


def verdict_lines(verdicts: Sequence[CellVerdict]) -> list[str]:
    """The verdicts as text: a line per cell, its problems indented below, then a summary."""
    lines = []
    for v in verdicts:
        lines.append(f"{'PASS' if v.passed else 'FAIL'}  {v.label}  ({v.cell_id}, {v.state})")
        lines += [f"      {p}" for p in v.problems]
    failed = [v for v in verdicts if not v.passed]
    lines.append(f"smoke: all {len(verdicts)} cells passed" if not failed and verdicts
                 else f"smoke: {len(failed)} of {len(verdicts)} cells failed")
    return lines


def verdicts_json(verdicts: Sequence[CellVerdict]) -> list[dict[str, Any]]:
    """The verdicts as JSON-ready dicts."""
    return [{"cell_id": v.cell_id, "label": v.label, "state": v.state, "passed": v.passed,
             "problems": list(v.problems)} for v in verdicts]
