"""Atomic checkpoints of the RL loop (model, optimizer, RNG states, step) as
``<out>/checkpoints/step_<N>.pt`` (the newest ``keep``). Plain data only, read with
``torch.load(weights_only=True)``: a pickle that builds objects (could run code) is refused
(:class:`UnsafeCheckpointError`) before any of it runs."""

from __future__ import annotations

import pickle
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from orchestrator.errors import KappaError
from orchestrator.runs.atomic import replacing

_NAME = re.compile(r"^step_(\d+)\.pt$")


class CheckpointError(KappaError):
    """A checkpoint file that cannot be used: unreadable, or not a kappa checkpoint."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint that is not plain data: loading it could run code."""


@dataclass(frozen=True)
class TrainState:
    """What a resumed run needs to continue exactly where it stopped."""

    step: int
    model: dict[str, Any]
    optimizer: dict[str, Any]
    torch_rng: torch.Tensor
    python_rng: object


def _checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every checkpoint in ``folder``, oldest first."""
    if not folder.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name)))


def latest_checkpoint(out_dir: Path) -> Path | None:
    """The checkpoint with the highest step, or ``None``."""
    found = _checkpoints(out_dir / "checkpoints")
    return found[-1][1] if found else None


def save_checkpoint(out_dir: Path, step: int, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer, keep: int = 2) -> Path:
    """Write the state after ``step`` completed RL steps; prune older checkpoints."""
    folder = out_dir / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step_{step}.pt"
    with replacing(path) as tmp:
        torch.save({
            "step": step,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "python_rng": random.getstate(),
        }, tmp)
    for _, old in _checkpoints(folder)[:-keep]:
        old.unlink(missing_ok=True)
    return path


def load_checkpoint(path: Path, device: torch.device) -> TrainState:
    """Read a checkpoint written by :func:`save_checkpoint` (nothing in the file runs)."""
    remedy = "delete it to restart the run from its previous checkpoint"
    try:
        blob = torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UnsafeCheckpointError(
            f"{path}: refused: not a plain-data checkpoint (loading it could run code); "
            f"{remedy}. ({str(exc).splitlines()[0]})") from None
    except (RuntimeError, EOFError, ValueError) as exc:  # torch's words for a corrupt file
        raise CheckpointError(f"{path}: unreadable checkpoint ({exc}); {remedy}") from None
    try:
        return TrainState(step=int(blob["step"]), model=blob["model"],
                          optimizer=blob["optimizer"], torch_rng=blob["torch_rng"].cpu(),
                          python_rng=_python_rng(blob["python_rng"]))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"{path}: not a kappa checkpoint ({exc!r}); {remedy}") from None


def _python_rng(state: Any) -> tuple[Any, ...]:
    """``random.getstate()``'s shape, checked: ``(version, (625 ints), gauss_next)``."""
    version, internal, gauss_next = state
    internal = tuple(internal)
    if not isinstance(version, int) or not all(isinstance(v, int) for v in internal):
        raise ValueError("malformed python RNG state")
    return (version, internal, gauss_next)


def restore_rng(state: TrainState) -> None:
    """Put the global RNGs back as they were when the checkpoint was written."""
    torch.set_rng_state(state.torch_rng)
    random.setstate(state.python_rng)  # type: ignore[arg-type]
