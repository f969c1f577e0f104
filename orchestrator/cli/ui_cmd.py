"""``kappa ui``: the MLflow UI on the sweeps' store, landing on a sweep's training runs."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from orchestrator import paths
from orchestrator.cli.completions import sweep_names
from orchestrator.cli.sweep_options import MlflowOption, RegistryOption
from orchestrator.redact import redact

commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app


@commands.command("ui")
def ui_cmd(
    sweep: Annotated[str | None, typer.Argument(
        help="The sweep to land on (default: the newest one).",
        autocompletion=sweep_names)] = None,
    # tracking.ui.UI_PORT, which reports link to (a literal: this module loads with every
    # command, and the tracking package is not light).
    port: Annotated[int, typer.Option("--port", help="Port to serve on.")] = 5000,
    host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
    open_browser: Annotated[bool, typer.Option(
        "--open", help="Open the printed URL in a web browser.")] = False,
    registry: RegistryOption = None,
    mlflow: MlflowOption = None,
) -> None:
    """Start the MLflow UI on the store the sweeps log to; print the URL of SWEEP's runs.

    The URL opens in the UI's Model training mode.

    Once the sweep has ended (or `kappa report SWEEP` ran), it lands on the sweep's saved
    view: every cell charted, grouped by the compared axis; before that, on the sweep's
    runs. It is printed last, once the server answers, without MLflow's start-up messages,
    with the address of the sweep's table and report. With an MLflow server as the store
    (--mlflow http://...), no server is started: the URL is that server's.
    """
    from orchestrator.sweeps.sweep import mlflow_experiment
    from orchestrator.tracking import absolute_uri, ui, ui_server

    ui_server.check_address(host, port)  # before anything is printed or started
    if sweep is not None:
        paths.check_name(sweep)
    uri = absolute_uri(paths.mlflow_uri(mlflow))
    ui_server.check_store(uri)
    found = mlflow_experiment(registry, sweep)
    remote = ui.is_server(uri)
    base = ui.without_credentials(uri) if remote else f"http://{ui.browser_host(host)}:{port}"

    def announce(up: bool) -> None:
        """The URL (the saved view if the server has it), with what it shows."""
        if found is None:
            _announce(ui.experiments_url(base), notes(up), open_browser)
            return
        name, experiment, parent = found
        view = up and ui.has_view(uri if remote else base, experiment, name)
        lines = [f"every cell of sweep {name} charted, grouped by the compared axis "
                 "(the saved view; docs/results.md#mlflow)" if view else
                 f"the runs of sweep {name}; its charted view is saved when it ends (or by "
                 f"`kappa report {name}`); docs/mlflow-ui.md"]
        if parent:
            lines.append(f"its table and report: {ui.artifacts_url(base, experiment, parent)}")
        url = ui.view_url(base, experiment, name) if view else ui.runs_url(base, experiment, name)
        _announce(url, [*lines, *notes(up)], open_browser)

    def notes(up: bool) -> list[str]:
        if remote:
            return []
        late = [] if up else [f"(the server has not answered at {base}/health yet: the page "
                              "may take a moment)"]
        return [f"store: {redact(uri)}; Ctrl-C stops the server", *late]

    if remote:
        announce(True)
        return
    ui_server.check_port_free(host, port)
    typer.echo(f"starting the MLflow UI on {host}:{port} ...", err=True)
    code = ui_server.serve(uri, host, port, f"{base}/health", announce)
    if code not in (0, 130, 143):  # 130, 143: stopped by Ctrl-C or kill
        typer.echo(f"error: the MLflow server exited with code {code}; its output is above",
                   err=True)
    raise typer.Exit(code)


def _announce(url: str, notes: list[str], open_browser: bool) -> None:
    """The URL, on a line of its own, with what it shows underneath; then the browser."""
    typer.echo(f"MLflow UI: {url}")
    for note in notes:
        typer.echo(f"  {note}")
    sys.stdout.flush()
    if open_browser:
        import webbrowser

        webbrowser.open(url)
