"""The warm-start cache: keyed by content, reused, and safe when two processes build it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.warmstart import cache_key, cache_path, load_or_build

TINY = {"task": "addition", "model": {"d_model": 16, "n_layers": 1, "n_heads": 2},
        "warm_start": {"steps": 5, "target_accuracy": None}}

_BUILD = """
import sys, torch
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.warmstart import load_or_build
ws = load_or_build(EmbeddedSettings(**{tiny!r}), torch.device("cpu"))
print(ws.source)
"""


def test_cache_key_follows_what_the_weights_depend_on() -> None:
    base = EmbeddedSettings(**TINY)
    assert cache_key(base) == cache_key(EmbeddedSettings(**TINY, baseline="dapo", max_steps=7))
    # The base model is shared by every RL seed; only its own seed makes another one.
    assert cache_key(base) == cache_key(EmbeddedSettings(**TINY, seed=1))
    other_base = {**TINY, "warm_start": {"steps": 5, "target_accuracy": None, "seed": 1}}
    assert cache_key(base) != cache_key(EmbeddedSettings(**other_base))
    assert cache_key(base) != cache_key(EmbeddedSettings(**{**TINY, "val_size": 17}))
    assert cache_key(base) != cache_key(EmbeddedSettings(**{**TINY, "task": "arithmetic"}))
    other_ws = {**TINY, "warm_start": {"steps": 6, "target_accuracy": None}}
    assert cache_key(base) != cache_key(EmbeddedSettings(**other_ws))


def test_built_once_then_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    settings = EmbeddedSettings(**TINY)
    first = load_or_build(settings, torch.device("cpu"))
    second = load_or_build(settings, torch.device("cpu"))
    assert (first.source, second.source) == ("built", "cache")
    assert first.sha256 == second.sha256
    assert first.path == cache_path(settings) and first.path.is_relative_to(tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(),
                                                 second.model.state_dict().values(), strict=True))
    assert [p.name for p in first.path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_two_processes_building_at_once(tmp_path: Path) -> None:
    env = {**os.environ, "KAPPA_HOME": str(tmp_path), "OMP_NUM_THREADS": "1"}
    code = _BUILD.format(tiny=TINY)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outputs = sorted(p.communicate()[0].strip() for p in procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs == ["built", "cache"]  # the second waited for the first, then reused it
