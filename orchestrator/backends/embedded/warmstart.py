"""Supervised warm start, the pretrained base model's stand-in: it teaches the policy the answer
format and partial accuracy before RL. Its seed is ``warm_start.seed``, not the RL seed: every
seed of a sweep starts from one policy, as a paper's seeds start from one checkpoint.

Settings matching a shipped base model (:mod:`.shipped`) load that file. Any other warm start
is built here and cached under ``cache_dir()/embedded/`` by a content hash of all it depends
on (torch's version included): a file lock makes a second process wait instead of building it
twice, and a rename publishes it, so no reader sees half a file."""

from __future__ import annotations

import fcntl
import io
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from orchestrator.backends.embedded.evaluation import greedy_accuracy
from orchestrator.backends.embedded.model import (
    ModelShape,
    TinyGPT,
    build_model,
    pack,
    response_logits,
    token_log_probs,
)
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.shipped import digest, key_content, sha256_file, verified
from orchestrator.backends.embedded.tasks import EOS, TASKS, TOKENIZER, Task, stable_seed
from orchestrator.runs.atomic import replacing

_PROBE_SIZE = 128
_PROBE_EVERY = 25


@dataclass(frozen=True)
class WarmStart:
    """A warm-started policy, where its weights came from and the SHA-256 of their file."""

    model: TinyGPT
    steps: int
    probe_accuracy: float
    path: Path
    source: Literal["shipped", "cache", "built"]
    sha256: str


def model_shape(settings: EmbeddedSettings) -> ModelShape:
    """The network shape a cell's settings ask for."""
    m = settings.model
    return ModelShape(vocab_size=TOKENIZER.vocab_size, context_length=m.context_length,
                      d_model=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads)


def cache_key(settings: EmbeddedSettings) -> str:
    """Content hash of everything the locally built warm-start weights depend on."""
    return digest({**key_content(settings), "torch": torch.__version__.split("+")[0]})


def cache_path(settings: EmbeddedSettings) -> Path:
    """Where the warm start of these settings is (or will be) cached."""
    from orchestrator.paths import cache_dir

    return cache_dir() / "embedded" / f"warmstart-{cache_key(settings)}.pt"


def _train(settings: EmbeddedSettings, task: Task,
           device: torch.device) -> tuple[TinyGPT, int, float]:
    ws = settings.warm_start
    model = build_model(model_shape(settings), stable_seed("init", ws.seed)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=ws.learning_rate, weight_decay=0.0)
    held_out = task.held_out_prompts(settings.val_size)
    probe = task.train_problems(stable_seed("probe", ws.seed), _PROBE_SIZE, held_out)
    max_new = task.max_solution_length + 1
    accuracy = 0.0
    step = 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(stable_seed("warm-start", ws.seed))
        for step in range(1, ws.steps + 1):
            batch = task.train_problems(stable_seed("warm", ws.seed, step), ws.batch_size,
                                        held_out)
            seqs = pack([TOKENIZER.encode_prompt(p.prompt) for p in batch],
                        [[*TOKENIZER.encode(p.solution), EOS] for p in batch], device)
            logp = token_log_probs(response_logits(model, seqs, 1.0), seqs.responses)
            loss = -(logp * seqs.response_mask).sum() / seqs.response_mask.sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            probing = ws.target_accuracy is not None and step % _PROBE_EVERY == 0
            if probing or step == ws.steps:
                accuracy = greedy_accuracy(model, task, probe, max_new)
                if ws.target_accuracy is not None and accuracy >= ws.target_accuracy:
                    break
    return model, step, accuracy


def build(settings: EmbeddedSettings, path: Path, device: torch.device) -> WarmStart:
    """Train the warm start of these settings and write it to ``path`` (atomically)."""
    model, steps, accuracy = _train(settings, TASKS[settings.task], device)
    # Saved through a buffer: torch.save names the archive inside after the file it writes
    # (a temporary name here), which would make equal weights differ in their checksum.
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "steps": steps, "probe_accuracy": accuracy}, buffer)
    with replacing(path) as tmp:
        tmp.write_bytes(buffer.getvalue())
    return WarmStart(model, steps, accuracy, path, "built", sha256_file(path))


def load_or_build(settings: EmbeddedSettings, device: torch.device) -> WarmStart:
    """The shipped base model of these settings (``UserInputError`` if damaged), else the
    cached warm start, built on a miss."""
    if (shipped := verified(settings)) is not None:
        return _load(shipped.path, settings, device, "shipped")
    path = cache_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if path.exists() and (cached := _read_cached(path, settings, device)) is not None:
            return cached
        return build(settings, path, device)


def _load(path: Path, settings: EmbeddedSettings, device: torch.device,
          source: Literal["shipped", "cache"]) -> WarmStart:
    # weights_only=True: a pickle that would run code never runs.
    blob = torch.load(path, map_location=device, weights_only=True)
    model = TinyGPT(model_shape(settings)).to(device)
    model.load_state_dict(blob["model"])
    return WarmStart(model, int(blob["steps"]), float(blob["probe_accuracy"]), path, source,
                     sha256_file(path))


def _read_cached(path: Path, settings: EmbeddedSettings, device: torch.device) -> WarmStart | None:
    """The warm start cached at ``path``, or ``None`` for a damaged file, rebuilt over (the
    build is deterministic; failing would fail every retry the same way)."""
    try:
        return _load(path, settings, device, "cache")
    except pickle.UnpicklingError:
        why = "not a plain-data warm start"
    except Exception as exc:  # whatever a damaged file makes torch raise: a cache miss
        why = f"unreadable ({type(exc).__name__}: {str(exc)[:200]})"
    print(f"[kappa] {path}: {why}, ignored and rebuilt", file=sys.stderr, flush=True)
    return None
