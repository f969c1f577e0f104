"""The verl GPU smoke test's backend side (docs/verl.md#gpu-smoke-test): synthetic prompts, the
folder they go to, what the machine lacks (the tiny model: :mod:`.tiny_model`; the spec:
:mod:`orchestrator.sweeps.smoke`). Files are renamed into place: no run sees half a file."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from orchestrator.data.records import VERL_COLUMNS, verl_row
from orchestrator.errors import Problem, UserInputError
from orchestrator.runs.atomic import replacing

TEMPLATE = Path(__file__).resolve().parents[3] / "experiments" / "verl" / "smoke.yaml"
DATA_SOURCE = "openai/gsm8k"
TRAIN_PROMPTS = 32
VAL_PROMPTS = 4


def prompt_rows(count: int, split: str, seed: int) -> list[dict[str, Any]]:
    """``count`` arithmetic prompts as verl rows (GSM8K style: the answer after ``####``)."""
    rng = random.Random(f"{seed}:{split}")
    rows = []
    for index in range(count):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        text = (f"What is {a} + {b}? Think step by step, then write the final answer "
                "after \"####\".")
        rows.append(verl_row(DATA_SOURCE, text, str(a + b), index, split))
    return rows


def write_prompts(data_dir: Path, train: int = TRAIN_PROMPTS, val: int = VAL_PROMPTS,
                  seed: int = 0) -> tuple[Path, Path]:
    """``data_dir/train.parquet`` and ``data_dir/val.parquet``, rewritten (cheap, atomic)."""
    import pandas as pd

    data_dir.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", train), ("val", val)):
        frame = pd.DataFrame(prompt_rows(count, split, seed), columns=list(VERL_COLUMNS))
        # 0o644: readable by the cluster's other users
        with replacing(data_dir / f"{split}.parquet", mode=0o644) as tmp:
            frame.to_parquet(tmp, index=False)
    return data_dir / "train.parquet", data_dir / "val.parquet"


def usable_out_dir(out_dir: Path) -> Path:
    """``out_dir`` made (absolute) and writable, or a user error naming ``--out``."""
    out = out_dir.expanduser().resolve()

    def refuse(why: str) -> UserInputError:
        return UserInputError("kappa smoke verl cannot write its files there", [Problem(
            "--out", why, found=str(out),
            fix="give --out a folder you can write (it is made if missing)")])

    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise refuse("is a file, not a folder") from exc
    except NotADirectoryError as exc:
        raise refuse("a part of the path is a file, not a folder") from exc
    except OSError as exc:
        raise refuse(f"cannot be made: {exc.strerror or exc}") from exc
    if not out.is_dir():
        raise refuse("is not a folder")
    if not os.access(out, os.W_OK | os.X_OK):
        raise refuse("is not writable")
    return out


def gpu_problems() -> list[str]:
    """Why this machine cannot run the smoke sweep (empty when it can): it needs a CUDA GPU
    visible to torch, and verl with vLLM and TransferQueue installed in this Python."""
    import importlib.util

    problems = []
    try:
        import torch

        if not torch.cuda.is_available():
            problems.append(f"no CUDA GPU is visible to torch {torch.__version__}")
    except ImportError:
        problems.append("torch is not installed")
    needed = {"verl": "verl is not installed",
              "vllm": "vLLM is not installed (verl's rollout engine for this test)",
              "transfer_queue": "TransferQueue is not installed (verl's V1 trainer needs it)"}
    problems += [why for module, why in needed.items()
                 if importlib.util.find_spec(module) is None]
    return problems


def require_gpu() -> None:
    """``UserInputError`` (exit 2) on a machine that cannot run the smoke sweep."""
    if problems := gpu_problems():
        raise UserInputError("kappa smoke verl needs a CUDA GPU and vLLM on this machine", [
            Problem("this machine", "; ".join(problems), fix=(
                "run it on a GPU node with verl's GPU extras (`pip install 'verl[vllm]'`); "
                "`kappa smoke verl --dry-run` builds the files and shows the 12 verl command "
                "lines without a GPU"))])
