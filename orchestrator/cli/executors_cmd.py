"""``kappa executors``: the installed executors (with their options) and backends, a
broken plug-in listed with its error."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import typer


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("NoneType", "None")


def _options(model: Any) -> list[dict[str, Any]]:
    """Each option of an executor's ``Options`` model: name, type, default, description."""
    rows = []
    for name, field in model.model_fields.items():
        required = field.is_required()
        default = None if required else field.get_default(call_default_factory=True)
        rows.append({"name": name, "type": _type_name(field.annotation), "required": required,
                     "default": default, "description": field.description or ""})
    return rows


def _describe(registry: Any, load: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per plug-in of ``registry``: its source and ``load(name)``, or its error."""
    from orchestrator.errors import UserInputError

    found = []
    for name in registry:
        source = registry.source(name)
        entry: dict[str, Any] = {"name": name, "entry_point": source.value,
                                 "distribution": source.distribution}
        try:
            entry.update(load(name))
        except UserInputError as exc:
            entry["error"] = exc.problems[0].found if exc.problems else exc.summary
        found.append(entry)
    return found


def describe_executors() -> list[dict[str, Any]]:
    """Every registered executor, with its options or the reason it cannot be loaded."""
    from orchestrator.executors import EXECUTORS, executor_class

    def load(name: str) -> dict[str, Any]:
        cls = executor_class(name)
        return {"job_id_prefix": cls.job_id_prefix, "options": _options(cls.Options)}

    return _describe(EXECUTORS, load)


def describe_backends() -> list[dict[str, Any]]:
    """Every registered backend, or the reason it cannot be loaded."""
    from orchestrator.backends import BACKENDS, get_backend

    def load(name: str) -> dict[str, Any]:
        get_backend(name)
        return {}

    return _describe(BACKENDS, load)


def executors_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the installed executors, each option they take (set with --executor NAME
    -E KEY=VALUE on submit, resume, canary and search), and the installed backends."""
    executors, backends = describe_executors(), describe_backends()
    if as_json:
        typer.echo(json.dumps({"executors": executors, "backends": backends}, indent=2,
                              default=str))
        return
    from rich.markup import escape
    from rich.table import Table

    from orchestrator.cli.console import make_console

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


def register(app: typer.Typer) -> None:
    """Add ``kappa executors`` to the ``kappa`` app."""
    app.command("executors")(executors_cmd)
