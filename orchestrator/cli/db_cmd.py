"""``kappa db``: the registry database's schema (show its revision, check it, migrate it)."""

from __future__ import annotations

import typer

from orchestrator import paths
from orchestrator.cli.sweep_options import RegistryOption

db_app = typer.Typer(
    help="The registry database: show its schema revision, migrate it.",
    no_args_is_help=True,
)
commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app
commands.add_typer(db_app, name="db")


@db_app.command("upgrade")
def upgrade(registry: RegistryOption = None) -> None:
    """Migrate the registry database to this kappa's schema (creates it if empty)."""
    from orchestrator.registry.engine import display_url, make_engine
    from orchestrator.registry.schema import upgrade_schema

    engine = make_engine(paths.registry_url(registry))
    try:
        before, after = upgrade_schema(engine)
    finally:
        engine.dispose()
    where = display_url(engine.url)
    if before.current == after.current:
        typer.echo(f"{where}: already at revision {after.current} (newest)")
    else:
        typer.echo(f"{where}: upgraded {before.current or '(empty)'} -> {after.current}")


@db_app.command("current")
def current(registry: RegistryOption = None) -> None:
    """Show the registry's schema revision and whether it needs `kappa db upgrade`."""
    from orchestrator.registry.engine import (
        display_url,
        make_engine,
        missing_sqlite_file,
        normalize_url,
    )
    from orchestrator.registry.schema import SchemaState, schema_status

    url = normalize_url(paths.registry_url(registry))
    if missing_sqlite_file(url):  # only looking: opening the file would create it
        typer.echo(f"registry: {display_url(url)}")
        typer.echo("status:   missing (created by `kappa submit` or `kappa db upgrade`)")
        return
    engine = make_engine(url)
    try:
        status = schema_status(engine)
    finally:
        engine.dispose()
    notes = {
        SchemaState.EMPTY: "empty; it is initialised on first use",
        SchemaState.CURRENT: "up to date",
        SchemaState.OUTDATED: "older than this kappa; run `kappa db upgrade`",
        SchemaState.NEWER: "made by a newer kappa",
        SchemaState.FOREIGN: "not a kappa registry",
    }
    typer.echo(f"registry: {display_url(engine.url)}")
    typer.echo(f"revision: {status.current or '(none)'}")
    typer.echo(f"newest:   {status.head}")
    typer.echo(f"status:   {status.state.value} ({notes[status.state]})")


@db_app.command("check")
def check(registry: RegistryOption = None) -> None:
    """Exit 0 if kappa can use the registry (initialising an empty one) and all of it reads
    (SQLite's integrity check, then every row), else 2 with the fix."""
    from orchestrator.registry import Registry

    with Registry.open(registry) as reg:
        reg.read_all()
        typer.echo(f"{reg.url}: ok")
