"""``kappa completion SHELL``: print the shell's tab-completion script for ``kappa``.

The script and the answers come from the same click completion classes (typer's, which
answer ``_KAPPA_COMPLETE`` in :func:`orchestrator.cli.app.main`), so they always agree;
nothing is imported until the command runs, so ``kappa --help`` pays nothing for it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from typer._click import Command

PROG_NAME = "kappa"
# The variable click reads to tell a completion request from a normal run.
COMPLETE_VAR = "_KAPPA_COMPLETE"


class Shell(StrEnum):
    """The shells ``kappa completion`` writes a script for."""

    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion_script(root: Command, shell: str) -> str:
    """The completion script for ``shell`` (``bash``, ``zsh`` or ``fish``) of ``root``,
    the ``kappa`` click command."""
    from typer._click.shell_completion import get_completion_class
    from typer.completion import completion_init

    # Registers typer's completion classes (the app is built without --install-completion).
    completion_init()
    comp_cls = get_completion_class(shell)
    if comp_cls is None:  # Shell() admits only the three registered shells
        raise ValueError(f"no completion class for {shell}")
    # The installed command's name, whatever started this process (python -m orchestrator).
    return comp_cls(root, {}, PROG_NAME, COMPLETE_VAR).source().strip() + "\n"


def completion_cmd(
    ctx: typer.Context,
    shell: Annotated[Shell, typer.Argument(help="The shell to complete in.")],
) -> None:
    """Print the tab-completion script for SHELL (bash, zsh or fish).

    Commands, options and choices complete as you type. Load it in every new shell:
    bash: eval "$(kappa completion bash)" in ~/.bashrc (bash 4.4 or newer); zsh: eval
    "$(kappa completion zsh)" in ~/.zshrc, after compinit; fish: kappa completion fish >
    ~/.config/fish/completions/kappa.fish. See docs/cli.md#shell-completion.
    """
    typer.echo(completion_script(ctx.find_root().command, shell.value), nl=False)


def register(app: typer.Typer) -> None:
    """Add ``kappa completion`` to the ``kappa`` app."""
    app.command("completion")(completion_cmd)
