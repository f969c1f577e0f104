"""``kappa ui``: the MLflow UI on the sweeps' store, landing on a sweep's training runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.sweep_options import MlflowOption, RegistryOption
from orchestrator.errors import Problem, UserInputError


def _sweep_experiment(sweep: str | None, registry: str | None) -> tuple[str, str] | None:
    """``(sweep name, MLflow experiment id)`` of ``sweep`` (default: the newest), or None."""
    from orchestrator.registry import Registry, RegistryMissing

    try:
        reg = Registry.open(registry, create=False)
    except RegistryMissing:
        if sweep is not None:
            raise
        return None
    with reg:  # an unknown sweep: the error lists the known ones
        newest = reg.list_sweeps() if sweep is None else [reg.get_sweep(sweep)]
    if not newest:
        return None
    record = newest[0]
    if record.mlflow_experiment_id is None:
        if sweep is None:
            return None
        raise UserInputError(f"sweep {sweep} has no MLflow experiment yet", [Problem(
            "sweep", "it was recorded without its MLflow experiment", found=sweep,
            fix=f"`kappa resume {sweep}` creates it")])
    return record.name, record.mlflow_experiment_id


def check_address(host: str, port: int) -> None:
    """Refuse a port outside 1 .. 65535 (0: the printed URL would be wrong) and a host
    that is neither an IP address nor a host name, before the URL is printed."""
    import ipaddress
    import re

    from orchestrator.limits import MAX_PORT

    problems = []
    if not 1 <= port <= MAX_PORT:
        problems.append(Problem("--port", "not a TCP port", found=str(port),
                                allowed=f"1 .. {MAX_PORT}", fix="e.g. --port 5000 (the default)"))
    label = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if len(host) > 253 or not re.fullmatch(rf"{label}(\.{label})*\.?", host):
            problems.append(Problem(
                "--host", "neither an IP address nor a host name", found=repr(host),
                allowed="an interface's address (127.0.0.1, 0.0.0.0, ::) or a host name "
                        "of letters, digits, '-' and '.'",
                fix="e.g. --host 127.0.0.1 (the default), or 0.0.0.0 for every interface"))
    if problems:
        raise UserInputError("cannot start the MLflow UI there", problems)


def ui_cmd(
    sweep: Annotated[str | None, typer.Argument(
        help="The sweep to land on (default: the newest one).")] = None,
    port: Annotated[int, typer.Option("--port", help="Port to serve on.")] = 5000,
    host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
    open_browser: Annotated[bool, typer.Option(
        "--open", help="Open the printed URL in a web browser.")] = False,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
) -> None:
    """Start the MLflow UI on the store the sweeps log to; print the URL of SWEEP's runs.

    The URL opens the sweep's training runs (filtered to the sweep, in the UI's Model
    training mode); it is printed last, once the server answers, without MLflow's
    start-up messages. With an MLflow server as the store (--mlflow http://...), no server
    is started: the URL is that server's.
    """
    from orchestrator import paths
    from orchestrator.redact import redact
    from orchestrator.tracking import absolute_uri
    from orchestrator.tracking.ui import (
        browser_host,
        experiments_url,
        is_server,
        runs_url,
        without_credentials,
    )

    check_address(host, port)  # before anything is printed or started
    if sweep is not None:
        paths.check_name(sweep)
    uri = absolute_uri(paths.mlflow_uri(mlflow))
    store = paths.local_store_path(uri)
    if store is not None and not store.exists():
        raise UserInputError(f"no MLflow store at {store} yet", [Problem(
            "mlflow", "nothing has been tracked there", found=redact(uri),
            fix="`kappa submit SPEC` creates it; or point KAPPA_HOME, KAPPA_MLFLOW_URI "
                "or --mlflow at an existing store")])
    found = _sweep_experiment(sweep, registry)
    remote = is_server(uri)
    base = without_credentials(uri) if remote else f"http://{browser_host(host)}:{port}"
    url = runs_url(base, found[1], found[0]) if found else experiments_url(base)
    notes = [f"the runs of sweep {found[0]}; see docs/mlflow-ui.md to compare them"] if found \
        else []
    if remote:
        _announce(url, notes)
        if open_browser:
            import webbrowser

            webbrowser.open(url)
        return
    notes.append(f"store: {redact(uri)}; Ctrl-C stops the server")
    _serve(uri, store, host, port, url, notes, f"{base}/health", open_browser)


def _announce(url: str, notes: list[str]) -> None:
    """The URL, on a line of its own, with what it shows underneath."""
    typer.echo(f"MLflow UI: {url}")
    for note in notes:
        typer.echo(f"  {note}")
    sys.stdout.flush()


def _serve(uri: str, store: Path | None, host: str, port: int, url: str, notes: list[str],
           health: str, open_browser: bool) -> None:
    """Start the local MLflow server on ``uri``; print the URL once it answers; stay
    until it stops (Ctrl-C), then exit with its code."""
    from orchestrator import paths
    from orchestrator.cli.ui_server import check_port_free, serve, server_env

    check_port_free(host, port)
    typer.echo(f"starting the MLflow UI on {host}:{port} ...", err=True)
    root = paths.mlflow_artifact_root().resolve().as_uri() if store is not None else None

    def announce(up: bool) -> None:
        _announce(url, notes if up else [*notes, f"(the server has not answered at {health} "
                                                  "yet: the page may take a moment)"])
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    code = serve([sys.executable, "-m", "mlflow", "server", "--host", host, "--port",
                  str(port)], server_env(os.environ, uri, root), health, announce)
    if code not in (0, 130, 143):  # 130, 143: stopped by Ctrl-C or kill
        typer.echo(f"error: the MLflow server exited with code {code}; its output is above",
                   err=True)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``kappa ui`` to the ``kappa`` app."""
    app.command("ui")(ui_cmd)
