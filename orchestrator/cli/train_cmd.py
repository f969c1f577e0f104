"""``kappa train CONFIG --out DIR``: run one embedded-trainer cell (resuming if started)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def load_settings(config: Path) -> object:
    """Read a flat YAML mapping of embedded settings; every problem raised at once."""
    import yaml

    from orchestrator.backends.embedded.backend import EmbeddedBackend
    from orchestrator.errors import Problem, UserInputError

    try:
        data = yaml.safe_load(config.read_text())
    except OSError as exc:
        raise UserInputError(f"cannot read {config}",
                             [Problem("", str(exc), file=str(config))]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UserInputError(f"{config} is not valid YAML", [Problem(
            "", str(getattr(exc, "problem", exc)), file=str(config),
            line=None if mark is None else mark.line + 1,
            column=None if mark is None else mark.column + 1)]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserInputError(f"{config} must hold a mapping of settings", [Problem(
            "", "expected a mapping (setting: value)", found=type(data).__name__,
            file=str(config))])
    return EmbeddedBackend().validate(data)


def register(app: typer.Typer) -> None:
    """Add the ``train`` command."""

    @app.command("train")
    def train(
        config: Annotated[Path, typer.Argument(help="Flat YAML of embedded-trainer settings.")],
        out: Annotated[Path, typer.Option(
            "--out", help="Run folder (resumes if it has checkpoints).")],
    ) -> None:
        """Train one cell with the embedded CPU RL trainer and write its run folder."""
        settings = load_settings(config)  # validated before any work starts
        from orchestrator.backends.embedded.settings import EmbeddedSettings
        from orchestrator.backends.embedded.trainer import train as run_training

        assert isinstance(settings, EmbeddedSettings)
        final = run_training(settings, out)
        val = {k: v for k, v in final.items() if k.startswith(("val-core/", "eval/"))}
        for key in sorted(val):
            typer.echo(f"{key}: {val[key]:.4f}")
