"""``kappa data prepare``: build verl parquet files for one dataset, from the Hugging Face
hub (through ``datasets``, imported only when asked for) or local jsonl/json/parquet files
(which work offline)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from orchestrator.data.adapters import DATASETS, DatasetAdapter, TokenCounter
from orchestrator.data.records import VERL_COLUMNS, verl_row
from orchestrator.errors import Problem, UserInputError, unknown_name

SourceKind = Literal["hub", "local"]
_WORDS = re.compile(r"\w+|[^\w\s]")
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
    yield from (dict(row) for row in datasets.load_dataset(repo_id, config, split=split))


def approximate_tokens(text: str) -> int:
    """Words plus punctuation marks: a tokenizer-free stand-in for BPE token counts (about
    what current LLMs' tokenizers give for English math text; ``--tokenizer`` is exact)."""
    return len(_WORDS.findall(text))


def hf_token_counter(name: str) -> TokenCounter:
    """Exact prompt lengths from a Hugging Face tokenizer (chat template applied)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name)

    def count(text: str) -> int:
        return len(tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                                 add_generation_prompt=True, tokenize=True))

    return count


@dataclass(frozen=True)
class PreparedSplit:
    """One written parquet file."""

    name: str
    path: Path
    rows: int


def build_rows(spec: DatasetAdapter, raw: Iterable[Mapping[str, Any]],
               count_tokens: TokenCounter = approximate_tokens) -> dict[str, list[dict[str, Any]]]:
    """verl rows per output split (pure: no files)."""
    problems = spec.problems(raw, count_tokens)
    return {split.name: [verl_row(spec.data_source, prompt, answer, i, split.name)
                         for i, (prompt, answer) in enumerate(problems[split.start:split.stop])]
            for split in spec.splits}


def prepare(name: str, out_dir: Path, source: SourceKind = "hub", local_path: Path | None = None,
            tokenizer: str | None = None) -> list[PreparedSplit]:
    """Write ``<out_dir>/<name>/<split>.parquet`` for each of the dataset's splits (an unknown
    ``name`` lists the known ones)."""
    if (spec := DATASETS.get(name)) is None:
        raise unknown_name("dataset", name, DATASETS, "--dataset")
    if source == "local":
        if local_path is None:
            raise UserInputError("--source local needs --local-path", [Problem(
                "--local-path", "missing", fix="pass --local-path FILE_OR_FOLDER")])
        raw: Iterable[Mapping[str, Any]] = read_local(local_path)
    elif source == "hub":
        raw = read_hub(spec.hub_id, spec.hub_config, spec.hub_split)
    else:
        raise UserInputError(f"unknown source '{source}'", [Problem(
            "--source", "unknown source", found=repr(source), allowed="hub, local")])
    rows = build_rows(spec, raw, hf_token_counter(tokenizer) if tokenizer else approximate_tokens)

    import pandas as pd

    target = out_dir / spec.name
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for split_name, split_rows in rows.items():
        path = target / f"{split_name}.parquet"
        pd.DataFrame(split_rows, columns=list(VERL_COLUMNS)).to_parquet(path, index=False)
        written.append(PreparedSplit(split_name, path, len(split_rows)))
    return written
