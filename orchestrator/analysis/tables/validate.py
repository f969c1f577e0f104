"""Check a :class:`TableSpec` against a results frame, reporting every problem at once."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from orchestrator.analysis.frame import axis_column, axis_names, hashable_value, metric_names
from orchestrator.analysis.tables.labels import default_metric_glob, match_metrics, value_matches
from orchestrator.analysis.tables.spec import TableSpec
from orchestrator.errors import Problem, UserInputError

if TYPE_CHECKING:
    import pandas as pd


def placements(spec: TableSpec) -> list[tuple[str, str]]:
    """``(option, axis)`` for every axis the spec places in the table or filters on."""
    named = [(f"--rows {a}", a) for a in (spec.rows if spec.cross is None else ())]
    named += [(f"--cross {a}", a) for a in spec.cross or ()]
    if spec.delta is not None:
        named.append(("--delta", spec.delta.axis))
    if spec.blocks is not None:
        named.append(("--blocks", spec.blocks))
    return named


def _state_text(frame: pd.DataFrame) -> str:
    counts = Counter(str(s) for s in frame["state"])
    return ", ".join(f"{s}×{n}" for s, n in sorted(counts.items())) or "no cells"


def metric_globs(frame: pd.DataFrame, spec: TableSpec) -> tuple[str, ...]:
    """The metric globs the table shows: ``--metrics``, else the default for ``frame``'s
    metrics (:func:`default_metric_glob`; none when there is none)."""
    default = default_metric_glob(metric_names(frame))
    return spec.metric_globs or ((default,) if default else ())


def validate(frame: pd.DataFrame, spec: TableSpec) -> list[tuple[str, str]]:
    """The ``(metric, header)`` columns of the table; raises ``UserInputError`` otherwise."""
    problems: list[Problem] = []
    axes = axis_names(frame)
    known = ", ".join(axes) or "(none)"
    placed = placements(spec)
    for location, name in [*placed, *((f"--where {a}", a) for a in spec.where)]:
        if name not in axes:
            hint = "--rows '' puts no axis on the rows" if location.startswith("--rows") else None
            problems.append(Problem(location, "no such axis in this sweep", found=repr(name),
                                    allowed=known, fix=hint))
    # An axis has one role: rows, delta, crossing and blocks each split the cells by it.
    roles: dict[str, list[str]] = {}
    for location, name in placed:
        roles.setdefault(name, []).append(location.split()[0])
    for name, where in roles.items():
        if len(where) > 1:
            problems.append(Problem(" and ".join(where), f"axis '{name}' is placed twice",
                                    found=repr(name),
                                    fix="give each axis one role: rows, delta, cross or blocks"))
    names = metric_names(frame)
    default = default_metric_glob(names)
    metrics = match_metrics(metric_globs(frame, spec), names)
    if not metrics:
        problems.append(Problem(
            "--metrics",
            "no final metric matches" if spec.metrics else "no evaluation metric to show",
            found=spec.metrics or "(default: eval/*/mean@k, else val-core/*/acc/mean@1)",
            allowed=", ".join(names) or f"(no final metrics yet; cells: {_state_text(frame)})",
            fix=f"e.g. --metrics '{default}'" if default else
            "name the columns with --metrics (globs: the * parts become headers)"))
    checks = [("--delta", spec.delta.axis, spec.delta.base)] if spec.delta is not None else []
    checks += [(f"--where {a}", a, text) for a, text in spec.where.items()]
    for location, name, text in checks:
        if name in axes and not any(value_matches(v, text) for v in frame[axis_column(name)]):
            values = dict.fromkeys(str(hashable_value(v)) for v in frame[axis_column(name)])
            problems.append(Problem(location, f"axis '{name}' never takes this value",
                                    found=text, allowed=", ".join(values)))
    if problems:
        raise UserInputError("cannot build the table", problems)
    return metrics
