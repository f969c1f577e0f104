"""``kappa data prepare``: datasets in verl's parquet format."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast

import typer

DATASET_NAMES = ("dapo-math-17k", "amc23", "aime24", "aime25", "math500", "olympiadbench")


data_app = typer.Typer(help="Datasets for the verl backend.", no_args_is_help=True)
commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app
commands.add_typer(data_app, name="data")


@data_app.command("prepare")
def prepare_cmd(
    dataset: Annotated[str, typer.Option(
        "--dataset", help=f"One of: {', '.join(DATASET_NAMES)}.")],
    out: Annotated[Path, typer.Option("--out", help="Folder; writes OUT/<dataset>/*.parquet.")],
    source: Annotated[str, typer.Option(
        "--source", help="hub (Hugging Face, needs network) or local.")] = "hub",
    local_path: Annotated[Path | None, typer.Option(
        "--local-path", help="jsonl/json/parquet file or folder (--source local).")] = None,
    tokenizer: Annotated[str | None, typer.Option(
        "--tokenizer", help="HF tokenizer for exact prompt lengths (default: approximate).")
    ] = None,
) -> None:
    """Write a dataset as verl parquet (data_source, prompt, reward_model, extra_info)."""
    from orchestrator.data.prepare import SourceKind, prepare

    # prepare() rejects anything but hub/local with a UserInputError (exit 2).
    for split in prepare(dataset, out, cast("SourceKind", source), local_path, tokenizer):
        typer.echo(f"{split.name}: {split.rows} rows -> {split.path}")
