"""A damaged warm-start cache is rebuilt, not fatal (issue 19, 9): a garbage file where
a cell's warm start is cached failed the cell on every attempt (three with two retries),
while an unsafe one (a pickle that would run code) was already rebuilt over."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from kit.cli import run_kappa
from kit.home import use_home

from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.warmstart import cache_path, load_or_build
from orchestrator.registry import CellState, Registry

TINY = {"task": "addition", "model": {"d_model": 16, "n_layers": 1, "n_heads": 2},
        "val_size": 8, "warm_start": {"steps": 2, "batch_size": 8, "target_accuracy": None}}

SPEC = """\
name: garbage-cache
backend: embedded
retries: 2
base:
  task: addition
  benchmarks: [add-val]
  group_size: 4
  prompts_per_step: 4
  ppo_mini_batches: 2
  max_steps: 2
  val_every: 2
  val_size: 8
  eval_samples: 2
  model: {d_model: 16, n_layers: 1, n_heads: 2}
  warm_start: {steps: 2, batch_size: 8, target_accuracy: null}
axes:
  seed: [0]
"""


def _truncated(path: Path) -> None:
    """A torch file cut in the middle (a full disk, a killed copy): torch.load raises
    RuntimeError, which the cache did not catch."""
    torch.save({"model": {"w": torch.zeros(4096)}, "steps": 2, "probe_accuracy": 0.0}, path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _another_shape(path: Path) -> None:
    wider = EmbeddedSettings(**{**TINY, "model": {"d_model": 32, "n_layers": 1, "n_heads": 2}})
    torch.save({"model": load_or_build(wider, torch.device("cpu")).model.state_dict(),
                "steps": 2, "probe_accuracy": 0.0}, path)


GARBAGE: dict[str, Callable[[Path], object]] = {
    "empty": lambda p: p.write_bytes(b""),
    "truncated": _truncated,
    "random bytes": lambda p: p.write_bytes(bytes(range(256)) * 40),
    "text": lambda p: p.write_text("not a warm start\n"),
    "a zip that is no torch file": lambda p: p.write_bytes(b"PK\x03\x04" + b"\0" * 100),
    "a plain pickle": lambda p: p.write_bytes(pickle.dumps({"model": 1}, protocol=2)),
    "keys missing": lambda p: torch.save({"weights": {}}, p),
    "another model's weights": _another_shape,
}


@pytest.mark.parametrize("plant", GARBAGE.values(), ids=GARBAGE.keys())
def test_a_damaged_cache_file_is_rebuilt_over(
        plant: Callable[[Path], object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    settings = EmbeddedSettings(**TINY)
    path = cache_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    plant(path)
    warm = load_or_build(settings, torch.device("cpu"))
    assert warm.source == "built" and warm.steps == 2
    assert "ignored and rebuilt" in capsys.readouterr().err
    assert load_or_build(settings, torch.device("cpu")).source == "cache"  # a good file now


def test_a_cell_over_a_garbage_cache_succeeds_on_its_first_attempt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Through ``kappa submit --wait``: the garbage file sits where the cell's warm start
    is cached; the cell rebuilds it and succeeds, once."""
    home = use_home(tmp_path / "home", monkeypatch)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    settings = EmbeddedSettings.model_validate(yaml.safe_load(SPEC)["base"])
    path = cache_path(settings)
    assert path.is_relative_to(home)
    path.parent.mkdir(parents=True)
    _truncated(path)
    ran = run_kappa(capsys, "submit", str(spec), "--wait")
    assert ran.code == 0, ran.output
    with Registry.open() as reg:
        [cell] = reg.cells("garbage-cache")
    assert (cell.state, cell.attempts_count) == (CellState.SUCCEEDED, 1)
    assert "ignored and rebuilt" in (Path(cell.run_dir or "") / "train.log").read_text()
    assert load_or_build(settings, torch.device("cpu")).source == "cache"
