"""The ``kappa`` command line: each command module's ``commands``, with heavy imports (torch,
mlflow, ray, sqlalchemy, pandas) inside the commands so that ``kappa --help`` stays instant.
``kappa completion`` and a shell's completion requests (:func:`main`) share typer's click
completion classes, so they always agree."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import traceback
from enum import StrEnum
from typing import Annotated

import typer

from orchestrator import configuration
from orchestrator.errors import KappaError, UserInputError
from orchestrator.paths import absolute_home
from orchestrator.redact import install_log_redaction, redact, redacted_output

# In the order ``kappa --help`` lists their commands (``completion`` last, below).
COMMAND_MODULES: tuple[str, ...] = tuple(f"orchestrator.cli.{name}_cmd" for name in (
    "algorithms", "train", "db", "spec", "sweep", "canary", "search", "executors", "ui",
    "results", "seeds", "data", "doctor", "smoke"))
PROG_NAME = "kappa"
# The variable click reads to tell a completion request from a normal run.
COMPLETE_VAR = "_KAPPA_COMPLETE"

app = typer.Typer(
    name="kappa", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="kappa: declarative sweeps for RL research on language models.\n\n"
         "Write one YAML spec; kappa expands it into a grid of cells, runs each cell on a "
         "backend (the embedded CPU trainer or verl), tracks every run in MLflow and a SQL "
         "registry, and turns the results into the papers' ablation tables.\n\n"
         "Tour: kappa validate SPEC -> kappa plan SPEC -> kappa submit SPEC --wait -> "
         "kappa status -> kappa table SWEEP -> kappa ui")

for _module in COMMAND_MODULES:  # each module's ``commands``, merged in this order
    _commands: typer.Typer = importlib.import_module(_module).commands
    app.registered_commands += _commands.registered_commands
    app.registered_groups += _commands.registered_groups


def _print_version(asked: bool) -> None:
    if asked:
        import orchestrator

        typer.echo(orchestrator.version_line())
        raise typer.Exit()


@app.callback()
def _options(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version,
        help="Print kappa's version and git commit, and exit.")] = False) -> None:
    """kappa's own options (before the command). Every command first checks every
    ``KAPPA_*`` variable: a bad one is refused here, not later in a background scheduler."""
    configuration.check_environment()


class Shell(StrEnum):
    """The shells ``kappa completion`` writes a script for."""

    bash = "bash"
    zsh = "zsh"
    fish = "fish"


@app.command("completion")
def completion_cmd(
    ctx: typer.Context,
    shell: Annotated[Shell, typer.Argument(help="The shell to complete in.")],
) -> None:
    """Print the tab-completion script for SHELL (bash, zsh or fish).

    Commands, options, their values, sweep names and cell ids complete as you type. Load
    it in every new shell: bash: eval "$(kappa completion bash)" in ~/.bashrc (bash 4.4 or
    newer); zsh: eval "$(kappa completion zsh)" in ~/.zshrc, after compinit; fish: kappa
    completion fish > ~/.config/fish/completions/kappa.fish. See docs/cli.md#shell-completion.
    """
    from typer._click.shell_completion import get_completion_class
    from typer.completion import completion_init

    # Registers typer's completion classes (the app is built without --install-completion).
    completion_init()
    comp_cls = get_completion_class(shell.value)
    if comp_cls is None:  # Shell() admits only the three registered shells
        raise ValueError(f"no completion class for {shell.value}")
    # The installed command's name, whatever started this process (python -m orchestrator).
    script = comp_cls(ctx.find_root().command, {}, PROG_NAME, COMPLETE_VAR).source()
    typer.echo(script.strip() + "\n", nl=False)


# A line that starts an example, a list item or a comment keeps its own line in --help.
_OWN_LINE = re.compile(r"\s|[-*#$>]|\d+[.)]\s")


def unwrap_help(doc: str) -> str:
    """``doc`` with each paragraph's line breaks joined into spaces, as click does for the
    first (typer keeps them in the others: sentences break mid-line at other widths). A
    paragraph marked ``\\b`` (click's no-rewrap mark) and lines of :data:`_OWN_LINE` keep
    theirs."""
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
        doc = command.help if isinstance(command.help, str) else inspect.getdoc(command.callback)
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
    install_log_redaction()
    if os.environ.get(COMPLETE_VAR):  # a shell asks for completions (kappa completion)
        from typer.completion import completion_init

        completion_init()  # typer's completion classes (see completion_cmd)
    with redacted_output():
        _run()


def _run() -> None:
    try:
        with absolute_home():
            app()
    except KappaError as exc:
        if _full_error():
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


def _full_error() -> bool:
    """``KAPPA_FULL_ERROR``; off when it is unreadable (the error being reported is then
    the check that names it, or one found before it)."""
    try:
        return bool(configuration.read("KAPPA_FULL_ERROR"))
    except UserInputError:
        return False


def _print_traceback(exc: BaseException) -> None:
    """Print ``exc``'s traceback to stderr with any password masked."""
    sys.stderr.write(redact("".join(traceback.format_exception(exc))))
    sys.stderr.flush()
