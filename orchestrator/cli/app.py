"""The ``kappa`` command line: one module per command group, each with ``register(app)``,
keeping heavy imports (torch, mlflow, ray, sqlalchemy, pandas) inside the command
functions so that ``kappa --help`` stays instant.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys

import typer

from orchestrator.errors import KappaError, UserInputError
from orchestrator.redact import install_log_redaction, redact, redacted_output

# In the order ``kappa --help`` lists their commands.
COMMAND_MODULES: tuple[str, ...] = tuple(f"orchestrator.cli.{name}_cmd" for name in (
    "algorithms", "train", "db", "spec", "sweep", "canary", "search", "executors", "ui",
    "results", "stopcheck", "data", "doctor", "smoke", "completion"))

app = typer.Typer(
    name="kappa", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="kappa: declarative sweeps for RL research on language models.\n\n"
         "Write one YAML spec; kappa expands it into a grid of cells, runs each cell on a "
         "backend (the embedded CPU trainer or verl), tracks every run in MLflow and a SQL "
         "registry, and turns the results into the papers' ablation tables.\n\n"
         "Tour: kappa validate SPEC -> kappa plan SPEC -> kappa submit SPEC --wait -> "
         "kappa status -> kappa table SWEEP -> kappa ui")

for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)

# A line that starts an example, a list item or a comment keeps its own line in --help.
_OWN_LINE = re.compile(r"\s|[-*#$>]|\d+[.)]\s")


def unwrap_help(doc: str) -> str:
    """``doc`` with each paragraph's single line breaks joined into spaces, as click
    does, so that the terminal wraps the text: typer keeps them in every paragraph but
    the first, which breaks sentences mid-line at any other width than the source's.
    A paragraph marked ``\\b`` (click's no-rewrap mark) and lines of :data:`_OWN_LINE`
    keep their breaks."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    for i, paragraph in enumerate(paragraphs):
        if paragraph.startswith("\b"):
            continue
        lines = paragraph.split("\n")
        paragraphs[i] = lines[0] + "".join(
            ("\n" if _OWN_LINE.match(line) else " ") + line for line in lines[1:])
    return "\n\n".join(paragraphs)


def _unwrap_helps(group: typer.Typer) -> None:
    """Give every command of ``group`` (and of its sub-groups) its unwrapped help."""
    for command in group.registered_commands:
        doc = command.help if isinstance(command.help, str) else inspect.getdoc(
            command.callback)
        if doc:
            command.help = unwrap_help(doc)
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            info = sub.typer_instance.info
            if isinstance(info.help, str):
                info.help = unwrap_help(info.help)
            _unwrap_helps(sub.typer_instance)


_unwrap_helps(app)


def main() -> None:
    """Console-script entry point: compact errors, exit code 2 for bad input. Output,
    log records and errors (tracebacks too: drivers put URLs in messages) are masked
    (:mod:`orchestrator.redact`); ``KAPPA_HOME`` is made absolute once, for the command
    and every process it starts."""
    from orchestrator.paths import absolute_home

    install_log_redaction()
    if os.environ.get("_KAPPA_COMPLETE"):  # a shell asks for completions (kappa completion)
        from typer.completion import completion_init

        completion_init()  # typer's completion classes (see completion_cmd.completion_script)
    with redacted_output(), absolute_home():
        _run()


def _run() -> None:
    try:
        app()
    except KappaError as exc:
        if os.environ.get("KAPPA_FULL_ERROR") == "1":
            _print_traceback(exc)
        if isinstance(exc, UserInputError):
            typer.echo(f"error: {exc.render()}", err=True)
            typer.echo("(set KAPPA_FULL_ERROR=1 for the full traceback)", err=True)
            sys.exit(exc.exit_code)
        typer.echo(f"error: {redact(str(exc))}", err=True)
        sys.exit(1)
    except Exception as exc:  # a bug or an environment failure: its traceback, masked
        _print_traceback(exc)
        sys.exit(1)


def _print_traceback(exc: BaseException) -> None:
    """Print ``exc``'s traceback to stderr with any password masked."""
    import traceback

    sys.stderr.write(redact("".join(traceback.format_exception(exc))))
    sys.stderr.flush()
