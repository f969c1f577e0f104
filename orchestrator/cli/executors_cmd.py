"""``kappa executors``: the installed executors (with their options) and backends, a
broken plug-in listed with its error."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from orchestrator.cli.console import make_console

commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app


def executor_names() -> list[str]:
    """The names of the installed executors (their entry points: nothing is loaded)."""
    from orchestrator.executors import EXECUTORS

    return list(EXECUTORS)


@commands.command("executors")
def executors_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the installed executors, each option they take (set with --executor NAME
    -E KEY=VALUE on submit, resume, canary and search), and the installed backends."""
    from orchestrator.spec.plugins import describe_backends, describe_executors

    executors, backends = describe_executors(), describe_backends()
    if as_json:
        typer.echo(json.dumps({"executors": executors, "backends": backends}, indent=2,
                              default=str))
        return
    from rich.markup import escape
    from rich.table import Table

    console = make_console()
    table = Table(title="executors (--executor NAME, -E OPTION=VALUE)", show_lines=True)
    for column in ("executor", "option", "type", "default", "description"):
        table.add_column(column, overflow="fold")
    for entry in executors:
        where = escape(f"{entry['entry_point']}\n{entry['distribution'] or 'in-process'}")
        label = f"[bold]{escape(entry['name'])}[/]\n[dim]{where}[/]"
        if "error" in entry:
            table.add_row(label, "", "", "", f"[red]cannot be loaded:[/] {escape(entry['error'])}")
            continue
        if not entry["options"]:
            table.add_row(label, "(none)", "", "", "")
        for n, option in enumerate(entry["options"]):
            default = "required" if option["required"] else repr(option["default"])
            table.add_row(label if n == 0 else "", escape(option["name"]),
                          escape(option["type"]), escape(default), escape(option["description"]))
    console.print(table)
    backs = Table(title="backends (backend: in a spec)")
    for column in ("backend", "entry point", "distribution"):
        backs.add_column(column, overflow="fold")
    for entry in backends:
        status = f"\n[red]cannot be loaded:[/] {escape(entry['error'])}" if "error" in entry \
            else ""
        backs.add_row(f"[bold]{escape(entry['name'])}[/]", escape(entry["entry_point"]) + status,
                      escape(entry["distribution"] or "in-process"))
    console.print(backs)
