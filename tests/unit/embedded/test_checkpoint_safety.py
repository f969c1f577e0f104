"""A checkpoint (or warm-start cache) whose unpickling would run code is refused, unrun."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest
import torch

from orchestrator.backends.embedded.checkpoint import (
    CheckpointError,
    UnsafeCheckpointError,
    load_checkpoint,
    restore_rng,
)


class _Payload:
    """Unpickling this calls ``Path.touch(marker)``: code a checkpoint must never run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (Path.touch, (self.marker,))


def _malicious(path: Path, marker: Path) -> Path:
    torch.save({"step": 3, "model": {}, "optimizer": {}, "torch_rng": torch.get_rng_state(),
                "python_rng": _Payload(marker)}, path)
    return path


def test_unsafe_pickle_checkpoint_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = _malicious(tmp_path / "step_3.pt", marker)
    with pytest.raises(UnsafeCheckpointError, match="not a plain-data checkpoint"):
        load_checkpoint(path, torch.device("cpu"))
    assert not marker.exists()
    # The control: an unrestricted load of the same file does run its code.
    torch.load(path, weights_only=False)
    assert marker.exists()


def test_checkpoint_of_the_old_format_still_loads(tmp_path: Path) -> None:
    """Checkpoints written before (``random.getstate()`` as a tuple) are plain data."""
    random.seed(5)
    path = tmp_path / "step_1.pt"
    torch.save({"step": 1, "model": {"w": torch.ones(2)}, "optimizer": {"state": {}},
                "torch_rng": torch.get_rng_state(), "python_rng": random.getstate()}, path)
    expected = random.random()
    state = load_checkpoint(path, torch.device("cpu"))
    restore_rng(state)
    assert random.random() == expected and state.step == 1


def test_a_file_that_is_no_checkpoint_gets_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "step_2.pt"
    torch.save({"step": 2, "model": {}}, path)
    with pytest.raises(CheckpointError, match="not a kappa checkpoint"):
        load_checkpoint(path, torch.device("cpu"))
    path.write_bytes(pickle.dumps("plain old pickle", protocol=2))
    with pytest.raises(CheckpointError, match="unreadable"):
        load_checkpoint(path, torch.device("cpu"))
    path.write_bytes(path.read_bytes()[:7])  # truncated
    with pytest.raises(CheckpointError):
        load_checkpoint(path, torch.device("cpu"))


def test_unsafe_warm_start_cache_is_rebuilt_not_run(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.backends.embedded import warmstart
    from orchestrator.backends.embedded.settings import EmbeddedSettings

    monkeypatch.setenv("KAPPA_CACHE", str(tmp_path / "cache"))
    settings = EmbeddedSettings.model_validate(
        {"model": {"d_model": 16, "n_layers": 1, "n_heads": 2}, "val_size": 4,
         "warm_start": {"steps": 2, "batch_size": 4, "target_accuracy": None}})
    path = warmstart.cache_path(settings)
    path.parent.mkdir(parents=True)
    marker = tmp_path / "pwned"
    torch.save({"model": _Payload(marker), "steps": 1, "probe_accuracy": 0.0}, path)
    warm = warmstart.load_or_build(settings, torch.device("cpu"))
    assert not marker.exists()
    assert warm.source == "built" and warm.steps >= 1
    assert warmstart.load_or_build(settings, torch.device("cpu")).source == "cache"  # rebuilt
