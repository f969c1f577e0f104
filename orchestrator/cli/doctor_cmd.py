"""``kappa doctor``: check a machine (and its cluster) before submitting sweeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.console import make_console
from orchestrator.cli.sweep_options import MlflowOption, RegistryOption

if TYPE_CHECKING:
    from orchestrator.doctor import CheckResult

RayAddressOption = Annotated[str | None, typer.Option(
    "--ray-address", metavar="URL", envvar="RAY_ADDRESS",
    help="The Ray cluster's dashboard (Jobs API) address, e.g. http://head:8265 "
         "(default: RAY_ADDRESS; without one the Ray check is skipped).")]
_STYLE = {"ok": "green", "warning": "yellow", "problem": "bold red", "skipped": "dim"}
commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app


@commands.command("doctor")
def doctor_cmd(
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
    ray_address: RayAddressOption = None,
    checkpoint_dir: Annotated[Path | None, typer.Option(
        "--checkpoint-dir", metavar="DIR",
        help="Where run folders and checkpoints go (default: KAPPA_HOME/runs).")] = None,
    python: Annotated[str | None, typer.Option(
        "--python", metavar="PATH",
        help="verl's interpreter, as in the spec's `python` setting (default: this "
             "Python here, python3 in Ray jobs).")] = None,
    min_free_gib: Annotated[float, typer.Option(
        "--min-free-gib", metavar="GIB",
        help="Warn when less disk than this is free for checkpoints.")] = 50.0,
    check: Annotated[list[str] | None, typer.Option(
        "--check", metavar="NAME",
        help="Run only this check (repeatable): python, packages, gpus, plugin, ray, "
             "mlflow, registry, disk.")] = None,
    timeout: Annotated[float, typer.Option(
        "--timeout", metavar="SECONDS",
        help="How long the plug-in's probe process or the Ray probe job may take; one "
             "request to a server gets at most 10 s.")] = 180.0,
    deep: Annotated[bool, typer.Option(
        "--deep", help="Import verl in the plug-in probes (here and in Ray workers), as a "
                       "run does: finds a plug-in that fails as verl loads it (about 10 s). "
                       "Without it, verl and the plug-in are checked as installed, not "
                       "imported.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Check this machine before submitting: versions, GPUs, the verl plug-in (here and
    in Ray workers), MLflow, the registry and free disk.

    Each check is ok, warning or problem (with the fix), or skipped (and why). Exit 0
    when nothing is a problem (warnings allowed), else 2. Every network request and
    probe is bounded (--timeout). Creates and writes nothing: no registry, MLflow store
    or KAPPA_HOME, and nothing in existing ones.
    """
    from orchestrator.doctor import DoctorOptions
    from orchestrator.doctor.run import exit_code, run_checks

    options = DoctorOptions(registry=registry, mlflow=mlflow, ray_address=ray_address,
                            checkpoint_dir=checkpoint_dir, python=python,
                            min_free_gib=min_free_gib, timeout_s=timeout, deep=deep)
    results = run_checks(options, check or ())
    code = exit_code(results)
    if as_json:
        typer.echo(json.dumps({"ok": code == 0, "exit_code": code,
                               "checks": [r.as_json() for r in results]}, indent=2,
                              allow_nan=False))
    else:
        _print_table(results, code)
    raise typer.Exit(code)


def _print_table(results: list[CheckResult], code: int) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="kappa doctor", show_lines=True)
    for column in ("check", "status", "found", "fix"):
        table.add_column(column, overflow="fold")
    for result in results:
        shown = result.as_json()
        status = result.status.value
        table.add_row(result.name, f"[{_STYLE[status]}]{status}[/]", escape(shown["summary"]),
                      escape(shown["fix"] or ""))
    console = make_console()
    console.print(table)
    counts = {s: sum(r.status.value == s for r in results) for s in _STYLE}
    verdict = "ready" if code == 0 else "not ready: fix the problems above"
    console.print(", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" — {verdict}")
