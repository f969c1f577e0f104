"""``kappa export``, ``kappa table``, ``kappa report``, ``kappa convergence``: a sweep's results,
or several sweeps' read as one (:mod:`orchestrator.analysis.combined`); ``kappa stop-check``:
stopping rules replayed on a finished full-length sweep, to choose a rule on yesterday's sweep
before spending on tomorrow's."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator import paths
from orchestrator.analysis import output as out
from orchestrator.cli.completions import sweep_names, values
from orchestrator.cli.sweep_options import MlflowOption, RegistryOption
from orchestrator.errors import Problem, UserInputError, unknown_name


def writable(option: str) -> Any:
    """A typer callback refusing a path ``option`` cannot write, before the command runs."""
    def check(ctx: typer.Context, path: Path | None) -> Path | None:
        if path is not None and not ctx.resilient_parsing:
            out.checked(path, option)
        return path
    return check


OutputOption = Annotated[Path | None, typer.Option(
    "--out", "--output", "-o", help="Write here instead of standard output.",
    callback=writable("--out"))]
JsonOption = Annotated[Path | None, typer.Option(
    "--json", metavar="FILE", help="Also write the figures as JSON here.",
    callback=writable("--json"))]
SweepsArgument = Annotated[list[str], typer.Argument(
    help="Sweep name; several are read as one: cells matched by their axes, the sweep of "
    "each number shown.", show_default=False, autocompletion=sweep_names)]
StrictOption = Annotated[bool, typer.Option(
    "--strict", help="Refuse (exit 2) when the runs compared were computed by different "
    "numerics (backend version, torch/verl/vLLM/CUDA, CPU kernels, GPU model); without it "
    "such numbers are marked ‡ and the difference is named.")]
EXPORT_FORMATS = ("csv", "parquet", "json")
BETTER = ("higher", "lower")
CONVERGENCE_FORMATS = ("markdown", "csv")
commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app


def _table_formats() -> list[str]:
    from orchestrator.analysis.tables import RENDERERS

    return list(RENDERERS)


def _scales() -> tuple[str, ...]:
    from typing import get_args

    from orchestrator.analysis.tables.spec import Scale

    return get_args(Scale)


def _numerics(runs: Any, strict: bool) -> None:
    """Say on stderr what differs in the numerics of these finished runs (a results frame
    or registry cells: :func:`~orchestrator.analysis.tables.numerics.finished_keys`); exit 2
    instead with ``strict``."""
    from orchestrator.analysis.tables.numerics import check_runs, finished_keys

    differ = check_runs(finished_keys(runs), "--strict", strict)
    if differ is not None:
        typer.echo(f"note: {differ} (see the numerics and prov.* columns of `kappa export`)",
                   err=True)


def _emit(text: str | Callable[[Path], None], output: Path | None) -> None:
    """``text`` on standard output, or to ``output`` (text, or a function filling a file)."""
    if output is not None:
        typer.echo(f"wrote {out.write(output, text, '--out')}", err=True)
    else:
        assert isinstance(text, str)  # parquet, the one function, needs --out
        typer.echo(out.shown(text, sys.stdout), nl=not text.endswith("\n"))


@commands.command("export")
def export(
    sweeps: SweepsArgument,
    fmt: Annotated[str, typer.Option("--format", "-f", help="csv | parquet | json",
                                     autocompletion=values(EXPORT_FORMATS))] = "csv",
    output: OutputOption = None,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
    strict: StrictOption = False,
) -> None:
    """Export the results frame: one row per cell (axis.*, metric.*, state, run, steps, and
    what made its numbers: numerics, prov.*; seeds.* with a seeds: block)."""
    from orchestrator.analysis.combined import results_of
    from orchestrator.analysis.frame import frame_text, parquet_writer
    from orchestrator.analysis.seed_live import with_seeds
    from orchestrator.analysis.studies import with_trials

    if fmt not in EXPORT_FORMATS:
        raise unknown_name("export format", fmt, EXPORT_FORMATS, "--format")
    if fmt == "parquet" and output is None:
        raise UserInputError("parquet is binary", [Problem(
            "--out", "parquet needs a file", fix="add --out results.parquet")])
    frame = with_seeds(with_trials(results_of(sweeps, registry, mlflow), sweeps, registry),
                       sweeps, registry)
    _numerics(frame, strict)
    _emit(parquet_writer(frame) if fmt == "parquet" else frame_text(frame, fmt), output)


@commands.command("table")
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
        "--format", "-f", help="markdown | latex | csv | html",
        autocompletion=values(_table_formats))] = "markdown",
    scale: Annotated[str, typer.Option(help="auto (points when in [0,1]) | points | raw",
                                       autocompletion=values(_scales))] = "auto",
    better: Annotated[str, typer.Option(
        help="higher | lower: which end of each column is bold (best).",
        autocompletion=values(BETTER))] = "higher",
    ci: Annotated[bool, typer.Option("--ci/--no-ci", help="Show confidence intervals.")] = True,
    confidence: Annotated[float, typer.Option(help="Confidence level of the intervals.")] = 0.95,
    output: OutputOption = None,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
    strict: StrictOption = False,
) -> None:
    """Print an ablation table: rows of baselines, '+ RB' delta rows, blocks per model."""
    from orchestrator.analysis.combined import check_sweep_names
    from orchestrator.analysis.report import table_text
    from orchestrator.analysis.tables import RENDERERS
    from orchestrator.analysis.tables.spec import options_spec

    check_sweep_names(sweeps)
    # Options that need no data fail before the (slower) results are read.
    if fmt not in RENDERERS:
        raise unknown_name("table format", fmt, RENDERERS, "--format")
    if better not in BETTER:
        raise unknown_name("direction", better, BETTER, "--better")
    spec = options_spec(
        rows, delta, cross, where or [], blocks=blocks, metrics=metrics, seed_axis=seed_axis,
        scale=scale, higher_is_better=better == "higher", show_ci=ci, confidence=confidence
    ).model_copy(update={"strict": strict})
    placed = rows is not None or bool(delta or cross or blocks)
    _emit(table_text(sweeps, spec, fmt, placed, registry, mlflow), output)


@commands.command("report")
def report(
    sweeps: SweepsArgument,
    output: Annotated[Path | None, typer.Option(
        "--out", "--output", "-o",
        help="The HTML file (default: SWEEP-report.html, A+B-report.html for several).",
        callback=writable("--out"))] = None,
    compare: Annotated[str | None, typer.Option(
        "--compare", metavar="AXIS",
        help="The axis the plots compare (colour); the other axes but the seed get one plot "
             "each. Default: reward_budget when it varies, else the first varying axis.")] = None,
    mlflow_ui: Annotated[str | None, typer.Option(
        help="MLflow UI base URL the cells link to (default: the tracking server, or where "
             "`kappa ui` serves a local store).")] = None,
    publish: Annotated[bool, typer.Option(
        "--publish/--no-publish",
        help="Also attach the report, its tables and plots, and the tables' deltas (as "
             "metrics) to the sweep's MLflow parent run, and save its charted view (one "
             "sweep only). A store out of reach is a warning, not an error.")] = True,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
    strict: StrictOption = False,
) -> None:
    """Write one self-contained HTML report (grid, tables, plots, plan, spec); works offline."""
    from orchestrator.analysis.combined import check_sweep_names
    from orchestrator.analysis.report import write_report

    # Before anything is read, and the default file name stays here.
    names = check_sweep_names(sweeps)
    target = write_report(names, output or Path(f"{'+'.join(names)}-report.html"),
                          registry_url=registry, mlflow_uri=mlflow, mlflow_ui=mlflow_ui,
                          strict=strict, compare=compare)
    typer.echo(f"wrote {target}")
    if publish and len(names) == 1:
        from orchestrator.analysis.mlflow_summary import publish_sweep

        typer.echo(publish_sweep(names[0], registry, mlflow, compare=compare, patient=False,
                                 report_html=target.read_text(encoding="utf-8")))


@commands.command("convergence")
def convergence(
    sweeps: SweepsArgument,
    metric: Annotated[str, typer.Option(
        help="Glob of the validation-accuracy curves.")] = "val-core/*/acc/mean@1",
    fmt: Annotated[str, typer.Option("--format", "-f", help="markdown | csv",
                                     autocompletion=values(CONVERGENCE_FORMATS))] = "markdown",
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
    strict: StrictOption = False,
) -> None:
    """Convergence step of every cell (docs/algorithms.md#convergence-step)."""
    from orchestrator.analysis.combined import results_of
    from orchestrator.analysis.dynamics import convergence_text

    if fmt not in CONVERGENCE_FORMATS:
        raise unknown_name("format", fmt, CONVERGENCE_FORMATS, "--format")
    _numerics(results_of(sweeps, registry, mlflow), strict)
    _emit(convergence_text(sweeps, metric, fmt, registry, mlflow), None)


@commands.command("stop-check")
def stop_check(
    sweep: Annotated[str, typer.Argument(
        help="A finished sweep, run to full length.", autocompletion=sweep_names)],
    rules: Annotated[Path | None, typer.Option(
        "--rules", metavar="FILE",
        help="YAML holding the stop: block to replay (plateau, threshold, diverged, "
             "together). Default: the sweep's own stop: block.")] = None,
    together: Annotated[str | None, typer.Option(
        metavar="AXES", help="Replace the rules' together: (comma-separated axes; '' for "
                             "none: every cell stops on its own).")] = None,
    metric: Annotated[str | None, typer.Option(
        help="The metric compared (default: the plateau or threshold rule's).")] = None,
    delta: Annotated[str | None, typer.Option(
        metavar="AXIS=BASE", help="The compared axis and its base value (default: the "
                                  "together axis, against its first value).")] = None,
    seed_axis: Annotated[str, typer.Option(help="Axis of replicate seeds.")] = "seed",
    json_out: JsonOption = None,
    registry: RegistryOption = None,
    strict: StrictOption = False,
) -> None:
    """Replay stopping rules on a finished sweep: for each delta, its value at full length,
    where the rules would have stopped, and the steps and hours saved.

    Example: kappa stop-check toy-table2 --rules plateau.yaml --together reward_budget
    """
    from orchestrator.analysis import stop_check as replay

    paths.check_name(sweep)
    plan, cells = replay.load(sweep, registry)
    _numerics(cells, strict)
    chosen = replay.chosen_rules(sweep, plan, cells, rules, together)
    axis, base = replay.compared_axis(delta, chosen, cells)
    result = replay.check_sweep(plan, cells, chosen, metric, axis, base, seed_axis)
    early = sum(1 for c in cells if c.stop_reason)
    if early:
        typer.echo(f"note: {early} cell(s) of {sweep} were stopped early when it ran; the "
                   "replay judges only the steps they ran", err=True)
    typer.echo(replay.render(result, replay.describe(chosen)), nl=False)
    if json_out is not None:
        out.write(json_out, json.dumps(result.as_json(), indent=1), "--json")
