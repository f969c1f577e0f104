"""``kappa export``, ``kappa table``, ``kappa report``, ``kappa convergence``: a sweep's results,
or several sweeps' read as one (:mod:`orchestrator.analysis.combined`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator import paths
from orchestrator.cli.sweep_options import MlflowOption, RegistryOption
from orchestrator.errors import Problem, UserInputError, unknown_name

OutputOption = Annotated[Path | None, typer.Option(
    "--out", "--output", "-o", help="Write here instead of standard output.")]
SweepsArgument = Annotated[list[str], typer.Argument(
    help="Sweep name; several are read as one: cells matched by their axes, the sweep of "
    "each number shown.", show_default=False)]
EXPORT_FORMATS = ("csv", "parquet", "json")
TABLE_FORMATS = ("markdown", "latex", "csv", "html")
BETTER = ("higher", "lower")


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        typer.echo(text, nl=not text.endswith("\n"))
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {output}", err=True)


def export(
    sweeps: SweepsArgument,
    fmt: Annotated[str, typer.Option("--format", "-f", help="csv | parquet | json")] = "csv",
    output: OutputOption = None,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
) -> None:
    """Export the results frame: one row per cell (axis.*, metric.*, state, run, steps)."""
    if fmt not in EXPORT_FORMATS:
        raise unknown_name("export format", fmt, EXPORT_FORMATS, "--format")
    if fmt == "parquet" and output is None:
        raise UserInputError("parquet is binary", [Problem(
            "--out", "parquet needs a file", fix="add --out results.parquet")])
    from orchestrator.analysis.combined import results_of
    from orchestrator.analysis.search_results import sweep_studies, with_trials

    frame = results_of(sweeps, registry, mlflow)
    if len(sweeps) == 1:  # a search's trials (one sweep's studies)
        frame = with_trials(frame, sweep_studies(sweeps[0], registry), sweeps[0], registry)
    if fmt == "parquet":
        assert output is not None
        output.parent.mkdir(parents=True, exist_ok=True)
        _parquet_ready(frame).to_parquet(output, index=False)
        typer.echo(f"wrote {output}", err=True)
    elif fmt == "json":
        _emit(_json_records(frame), output)
    else:
        _emit(frame.to_csv(index=False), output)


def _json_value(value: Any) -> Any:
    """NaN as ``null``, ±inf as ``"inf"``/``"-inf"`` (as a spec writes it), not missing."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        return _json_value(value.item())
    return value


def _json_records(frame: Any) -> str:
    """The frame as a JSON list of records, one per cell, keeping axis values' types."""
    records = [{str(k): _json_value(v) for k, v in record.items()}
               for record in frame.to_dict("records")]
    return json.dumps(records, indent=2, allow_nan=False) + "\n"


def _parquet_ready(frame: Any) -> Any:
    """Parquet needs one type per column: axis columns of mixed types become strings."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object:
            inferred = frame[column].infer_objects()
            mixed = inferred.dtype == object and len({type(v) for v in inferred.dropna()}) > 1
            frame[column] = (inferred.astype(str).where(inferred.notna(), None) if mixed
                             else inferred)
    return frame


def _split(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(p.strip() for p in text.split(",") if p.strip())


def _table_spec(**fields: Any) -> Any:
    from pydantic import ValidationError

    from orchestrator.analysis.tables import TableSpec
    from orchestrator.backends.validation import problems_from_validation_error

    try:
        return TableSpec(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise UserInputError("invalid table options", problems_from_validation_error(exc)) from None


def _parse_where(items: list[str]) -> dict[str, str]:
    where, problems = {}, []
    for item in items:
        axis, sep, value = item.partition("=")
        if not sep or not axis.strip():
            problems.append(Problem("--where", "expected AXIS=VALUE", found=item))
        else:
            where[axis.strip()] = value.strip()
    if problems:
        raise UserInputError("invalid --where", problems)
    return where


def table(
    sweeps: SweepsArgument,
    rows: Annotated[str | None, typer.Option(
        help="Axes labelling the rows (comma-separated; '' for none, e.g. when the "
        "--delta axis is the only one that varies). With none of --rows, --delta, "
        "--cross, --blocks, the layout follows the sweep's axes: every varying axis "
        "labels rows, reward_budget gives '+ RB' delta rows, model gives blocks.")] = None,
    delta: Annotated[str | None, typer.Option(
        help="AXIS=BASE: other values of AXIS become signed delta rows "
        "(e.g. reward_budget=false).")] = None,
    cross: Annotated[str | None, typer.Option(
        help="Crossing table over these axes (e.g. use_kl_loss,reward_budget), absolute "
        "scores.")] = None,
    blocks: Annotated[str | None, typer.Option(
        help="One block per value of this axis (e.g. model).")] = None,
    metrics: Annotated[str | None, typer.Option(
        help="Metric globs; the * parts are column headers. Default: eval/*/mean@k for the "
        "k the runs logged, else val-core/*/acc/mean@1.")] = None,
    where: Annotated[list[str] | None, typer.Option(help="AXIS=VALUE filter (repeatable).")] = None,
    seed_axis: Annotated[str, typer.Option(help="Axis of replicate seeds.")] = "seed",
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="markdown | latex | csv | html")] = "markdown",
    scale: Annotated[str, typer.Option(help="auto (points when in [0,1]) | points | raw")] = "auto",
    better: Annotated[str, typer.Option(
        help="higher | lower: which end of each column is bold (best).")] = "higher",
    ci: Annotated[bool, typer.Option("--ci/--no-ci", help="Show confidence intervals.")] = True,
    confidence: Annotated[float, typer.Option(help="Confidence level of the intervals.")] = 0.95,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples for delta CIs.")] = 10_000,
    bootstrap_seed: Annotated[int, typer.Option(help="Seed of the bootstrap (deterministic).")] = 0,
    output: OutputOption = None,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
) -> None:
    """Print an ablation table: rows of baselines, '+ RB' delta rows, blocks per model."""
    from orchestrator.analysis.combined import check_sweep_names, results_of
    from orchestrator.analysis.tables import DeltaSpec, build_table, render

    check_sweep_names(sweeps)
    # Options that need no data fail before the (slower) results are read.
    if fmt not in TABLE_FORMATS:
        raise unknown_name("table format", fmt, TABLE_FORMATS, "--format")
    if better not in BETTER:
        raise unknown_name("direction", better, BETTER, "--better")
    try:
        delta_spec = DeltaSpec.parse(delta) if delta else None
    except ValueError as exc:
        raise UserInputError("invalid --delta", [Problem(
            "--delta", str(exc), fix="e.g. --delta reward_budget=false")]) from None
    spec = _table_spec(
        rows=_split(rows), delta=delta_spec, cross=_split(cross), blocks=blocks,
        metrics=metrics, where=_parse_where(where or []), seed_axis=seed_axis, scale=scale,
        higher_is_better=better == "higher", show_ci=ci, confidence=confidence,
        n_resamples=resamples, bootstrap_seed=bootstrap_seed)
    if rows is None and not (delta or cross or blocks or metrics) and len(sweeps) == 1:
        from orchestrator.analysis.search_results import best_table, render_best, sweep_studies

        studies = sweep_studies(sweeps[0], registry)
        if studies:  # a search: the best trial of each study, with its settings
            _emit(render_best(best_table(studies), fmt), output)
            return
    frame = results_of(sweeps, registry, mlflow)
    if rows is None and not (delta or cross or blocks):
        from orchestrator.analysis.report import auto_layout

        spec = auto_layout(frame, spec)
    _emit(render(build_table(frame, spec), fmt), output)


def report(
    sweeps: SweepsArgument,
    output: Annotated[Path | None, typer.Option(
        "--out", "--output", "-o",
        help="The HTML file (default: SWEEP-report.html, A+B-report.html for several).")] = None,
    mlflow_ui: Annotated[str, typer.Option(
        help="MLflow UI base URL the cells link to.")] = "http://127.0.0.1:5000",
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
) -> None:
    """Write one self-contained HTML report (grid, tables, plots, plan, spec); works offline."""
    from orchestrator.analysis.combined import check_sweep_names
    from orchestrator.analysis.report import build_report

    # Before anything is read, and the default file name stays here.
    names = check_sweep_names(sweeps)
    html = build_report(names, registry_url=registry, mlflow_uri=mlflow, mlflow_ui=mlflow_ui)
    target = output or Path(f"{'+'.join(names)}-report.html")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    typer.echo(f"wrote {target}")


def convergence(
    sweeps: SweepsArgument,
    metric: Annotated[str, typer.Option(
        help="Glob of the validation-accuracy curves.")] = "val-core/*/acc/mean@1",
    fmt: Annotated[str, typer.Option("--format", "-f", help="markdown | csv")] = "markdown",
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
) -> None:
    """Convergence step of every cell (docs/algorithms.md#convergence-step)."""
    from orchestrator.analysis.combined import results_of
    from orchestrator.analysis.curves import load_curves
    from orchestrator.analysis.dynamics import convergence_frame

    if fmt not in ("markdown", "csv"):
        raise unknown_name("format", fmt, ("markdown", "csv"), "--format")
    frame = results_of(sweeps, registry, mlflow)
    curves = load_curves(frame, [metric], paths.readable_mlflow_uri(mlflow))
    if curves.empty:
        _check_curve_glob(frame, metric, paths.readable_mlflow_uri(mlflow))
    conv = convergence_frame(curves, frame, metric)
    conv.columns = [c.removeprefix("axis.") for c in conv.columns]
    if fmt == "csv":
        _emit(conv.to_csv(index=False), None)
        return
    header = "| " + " | ".join(map(str, conv.columns)) + " |"
    lines = [header, "| " + " | ".join("---" for _ in conv.columns) + " |"]
    lines += ["| " + " | ".join(_md_value(c, v) for c, v in zip(conv.columns, row, strict=True))
              + " |" for row in conv.itertuples(index=False)]
    _emit("\n".join(lines) + "\n", None)


def _md_value(column: str, value: Any) -> str:
    """A convergence-table value: steps to 0.1, values to 4 decimals, ``—`` when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if column == "convergence_step":
        return f"{float(value):.1f}"
    if column == "last_value":
        return f"{float(value):.4f}"
    return str(value)


def _check_curve_glob(frame: Any, metric: str, mlflow_uri: str | None) -> None:
    """Raise when cells logged curves but none is named like ``metric`` (a typo)."""
    from orchestrator.analysis.curves import load_curves

    logged = sorted(set(load_curves(frame, ["*"], mlflow_uri)["metric"]))
    if logged:
        raise UserInputError("no curve matches --metric", [Problem(
            "--metric", "no per-step metric of this sweep matches", found=metric,
            allowed=", ".join(logged), fix="use a glob such as 'val-core/*/acc/mean@1'")])


def register(app: typer.Typer) -> None:
    """Add the result commands to the ``kappa`` app."""
    app.command("export")(export)
    app.command("table")(table)
    app.command("report")(report)
    app.command("convergence")(convergence)
