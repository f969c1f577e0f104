"""Fixtures for grid tests: the embedded backend with and without declared coupling."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from orchestrator import backends

# What the embedded settings' cross-field rules read (EmbeddedSettings' model validators
# and ModelSettings'); used while the backend does not declare coupled_settings itself.
EMBEDDED_COUPLED = frozenset(
    {
        "model", "clip_ratio", "clip_ratio_low", "clip_ratio_high", "prompts_per_step",
        "ppo_mini_batches", "reward_correct", "reward_incorrect", "task", "benchmarks",
        "max_response_length",
    }
)  # fmt: skip


@pytest.fixture(autouse=True)
def kappa_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep any state the code under test writes in a tmp dir."""
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "kappa-home"))


@pytest.fixture(params=["undeclared", "declared"])
def coupling(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test twice: every axis coupled (no declaration), and with the declared set."""
    real = type(backends.get_backend("embedded"))
    declared = None
    if request.param == "declared":
        declared = getattr(real, "coupled_settings", None) or EMBEDDED_COUPLED
    cls = type(f"Embedded_{request.param}", (real,), {"coupled_settings": declared})
    module = types.ModuleType("kappa_grid_test_backends")
    module.Backend = cls  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(backends.BACKENDS, "embedded", f"{module.__name__}:Backend")
    return str(request.param)
