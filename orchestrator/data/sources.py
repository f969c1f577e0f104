"""Where raw problems come from: local jsonl/json/parquet files, or the Hugging Face hub
(through ``datasets``, imported only when asked for: local files work offline)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.errors import Problem, UserInputError

LOCAL_SUFFIXES: tuple[str, ...] = (".jsonl", ".json", ".parquet")


def read_local(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a jsonl/json/parquet file, or of every such file under a folder (sorted)."""
    if not path.exists():
        raise UserInputError(f"local dataset path {path} does not exist", [Problem(
            "--local-path", "no such file or folder", found=str(path),
            fix="point --local-path at a .jsonl, .json or .parquet file (or a folder of them)")])
    files = (sorted(p for p in path.rglob("*") if p.suffix in LOCAL_SUFFIXES) if path.is_dir()
             else [path])
    bad = [f for f in files if f.suffix not in LOCAL_SUFFIXES]
    if bad or not files:
        raise UserInputError(f"no readable dataset files at {path}", [Problem(
            "--local-path", "unsupported file type" if bad else "folder has no dataset files",
            found=", ".join(str(f) for f in bad) or str(path),
            allowed=", ".join(LOCAL_SUFFIXES))])
    for file in files:
        if file.suffix == ".parquet":
            import pandas as pd

            yield from pd.read_parquet(file).to_dict(orient="records")
        elif file.suffix == ".jsonl":
            with file.open(encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        yield json.loads(line)
        else:
            data = json.loads(file.read_text(encoding="utf-8"))
            yield from (data if isinstance(data, list) else [data])


def read_hub(repo_id: str, config: str | None, split: str) -> Iterator[dict[str, Any]]:
    """Rows of a Hugging Face hub dataset split (needs network and ``datasets``)."""
    try:
        import datasets
    except ImportError as exc:
        raise UserInputError("reading from the hub needs the 'datasets' package", [Problem(
            "--source", "datasets is not installed", found="hub",
            fix="pip install datasets, or use --source local --local-path FILE")]) from exc
    dataset = datasets.load_dataset(repo_id, config, split=split)
    for row in dataset:
        yield dict(row)
