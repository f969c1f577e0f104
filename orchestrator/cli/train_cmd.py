"""``kappa train CONFIG --out DIR``: run one embedded-trainer cell (resuming if started)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.errors import Problem, UserInputError

commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app


def load_settings(config: Path) -> object:
    """Read a flat YAML mapping of embedded settings; every problem at once, located."""
    from orchestrator.backends.embedded.backend import EmbeddedBackend
    from orchestrator.spec.block_file import read_settings

    return read_settings(config, EmbeddedBackend().validate, "embedded settings")


def prepare_out(out: Path) -> None:
    """Make sure ``out`` is a folder training can write in, else a ``UserInputError``."""
    def refuse(message: str, fix: str) -> UserInputError:
        return UserInputError(f"cannot use --out {out}", [Problem(
            "--out", message, found=str(out), fix=fix)])

    if out.exists() and not out.is_dir():
        raise refuse("this is a file, not a folder", "name a new or existing run folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".kappa-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise refuse(f"cannot write here: {exc.strerror or exc}",
                     "name a folder you can write in") from None


@commands.command("train")
def train(
    config: Annotated[Path, typer.Argument(help="Flat YAML of embedded-trainer settings.")],
    out: Annotated[Path, typer.Option(
        "--out", help="Run folder (resumes if it has checkpoints).")],
) -> None:
    """Train one cell with the embedded CPU RL trainer and write its run folder."""
    settings = load_settings(config)  # validated before any work starts
    prepare_out(out)
    from orchestrator.backends.embedded.settings import EmbeddedSettings
    from orchestrator.backends.embedded.trainer import train as run_training

    assert isinstance(settings, EmbeddedSettings)
    for key, value in sorted(run_training(settings, out).items()):
        if key.startswith(("val-core/", "eval/")):
            typer.echo(f"{key}: {value:.4f}")
