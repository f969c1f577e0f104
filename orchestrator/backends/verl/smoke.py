"""The verl GPU smoke test's files (docs/verl.md#gpu-smoke-test): a tiny model, synthetic
prompts and the rendered spec (the template names its paths as ``${KAPPA_SMOKE_DIR}/...``).
Every file is written under a name of its own and renamed into place, so runs sharing one
folder never see half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.backends.verl.settings import SMOKE_PLACEHOLDER as SMOKE_VAR
from orchestrator.data.records import VERL_COLUMNS, verl_row
from orchestrator.errors import Problem, UserInputError
from orchestrator.paths import kappa_home
from orchestrator.runs.atomic import replacing, write_atomic

TEMPLATE = Path(__file__).resolve().parents[3] / "experiments" / "verl" / "smoke.yaml"
DATA_SOURCE = "openai/gsm8k"
TRAIN_PROMPTS = 32
VAL_PROMPTS = 4


@dataclass(frozen=True)
class SmokeFiles:
    """What :func:`prepare_smoke` wrote."""

    out_dir: Path
    model: Path
    train: Path
    val: Path
    spec: Path


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
    """``data_dir/train.parquet`` and ``data_dir/val.parquet`` (rewritten each time:
    cheap, and atomic per file)."""
    import pandas as pd

    data_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for split, count in (("train", train), ("val", val)):
        path = data_dir / f"{split}.parquet"
        frame = pd.DataFrame(prompt_rows(count, split, seed), columns=list(VERL_COLUMNS))
        with replacing(path, mode=0o644) as tmp:  # readable by the cluster's other users
            frame.to_parquet(tmp, index=False)
        paths.append(path)
    return paths[0], paths[1]


def _fill(value: Any, out_dir: str) -> Any:
    if isinstance(value, str):
        return value.replace(SMOKE_VAR, out_dir)
    if isinstance(value, list):
        return [_fill(v, out_dir) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, out_dir) for k, v in value.items()}
    return value


def spec_text(out_dir: Path, template: Path = TEMPLATE,
              base: Mapping[str, Any] | None = None) -> str:
    """``template`` with ``${KAPPA_SMOKE_DIR}`` = ``out_dir`` (absolute) in every string
    and ``base`` merged into its ``base:`` settings, as YAML (nothing is written)."""
    import yaml

    if not template.is_file():
        raise UserInputError("the smoke spec template is missing", [Problem(
            "--spec", "no such file", found=str(template),
            fix="pass --spec experiments/verl/smoke.yaml of a kappa checkout")])
    data = _fill(yaml.safe_load(template.read_text()), str(out_dir.resolve()))
    data["base"] = {**data.get("base", {}), **dict(base or {})}
    # One sweep per rendered spec: two folders (or machines sharing a registry) or two
    # versions of the template never mix their cells, and a rerun reruns exactly these.
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode())
    data["name"] = f"{data.get('name', 'verl-smoke')}-{digest.hexdigest()[:8]}"
    header = (f"# Rendered by `kappa smoke verl` from {template.name}; "
              f"{SMOKE_VAR} = {out_dir.resolve()}\n")
    return header + yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True)


def render_spec(out_dir: Path, template: Path = TEMPLATE,
                base: Mapping[str, Any] | None = None) -> Path:
    """Write :func:`spec_text` to ``out_dir/smoke.yaml`` and return its path."""
    text = spec_text(out_dir, template, base)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "smoke.yaml"
    write_atomic(path, text, mode=0o644)
    return path


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


def prepare_smoke(out_dir: Path | None = None, template: Path = TEMPLATE,
                  base: Mapping[str, Any] | None = None) -> SmokeFiles:
    """Build the model, write the prompts and render the spec under ``out_dir`` (default:
    ``$KAPPA_HOME/smoke/verl``)."""
    from orchestrator.backends.verl.tiny_model import build_tiny_model

    out = usable_out_dir(out_dir or kappa_home() / "smoke" / "verl")
    model = build_tiny_model(out / "model")
    train, val = write_prompts(out / "data")
    spec = render_spec(out, template, base)
    return SmokeFiles(out, model, train, val, spec)


def gpu_problems() -> list[str]:
    """Why this machine cannot run the smoke sweep (empty when it can): a CUDA GPU
    visible to torch, and verl with its GPU extras (vLLM, the rollout engine here, and
    TransferQueue, which verl 0.9's V1 trainer needs) installed in this Python."""
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
