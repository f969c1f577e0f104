"""A tiny real backend for scheduler tests: its launch is a real process (see
``sweep_fake_trainer.py``) that honours the run-folder contract, checkpoints every step
and resumes from its checkpoint, and records every completion in a shared file.

Register it with ``BACKENDS["fake"] = "sweep_fixtures:FakeBackend"`` (the CLI bootstrap
``sweep_cli.py`` does that in subprocesses).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.backends.base import Backend, LaunchSpec

HERE = Path(__file__).resolve().parent
TRAINER = HERE / "sweep_fake_trainer.py"
CLI = HERE / "sweep_cli.py"
BACKEND_ENTRY = "sweep_fixtures:FakeBackend"


class FakeSettings(BaseModel):
    """What a fake cell does."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: int = Field(4, ge=1)
    step_seconds: float = Field(0.02, ge=0)
    fail_first: int = Field(0, ge=0, description="fail this many launches, then succeed")
    fail_at_step: int = Field(0, ge=0, description="crash when reaching this step (0: never)")
    seed: int = 0
    hold_at: int = Field(0, ge=0, description="from this step on (0: never), wait before "
                         "each step until <run_dir>/go exists")
    baseline: str = Field("grpo", description="only shifts the fake eval metrics")
    reward_budget: bool = Field(False, description="adds 0.05 to the fake eval metrics")


class FakeBackend(Backend):
    """Launches ``sweep_fake_trainer.py`` in the run folder."""

    name = "fake"
    settings_model = FakeSettings

    def launch(self, settings: BaseModel, run_dir: Path) -> LaunchSpec:
        return LaunchSpec(argv=(sys.executable, str(TRAINER), str(run_dir / "config.yaml"),
                                "--out", str(run_dir)))

    def canary_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """At most two steps (a cell failing later passes its canary, as on a real backend)."""
        steps = FakeSettings.model_validate(settings).steps
        return {**settings, "steps": min(steps, 2)}


def write_spec(path: Path, name: str, seeds: int = 4, retries: int = 0,
               **base: object) -> Path:
    """A spec of ``seeds`` fake cells (axis ``seed``) with ``base`` settings."""
    base_yaml = "".join(f"  {k}: {json.dumps(v)}\n" for k, v in base.items()) or "  steps: 4\n"
    path.write_text(f"name: {name}\nbackend: fake\nretries: {retries}\nbase:\n{base_yaml}"
                    f"axes:\n  seed: {list(range(seeds))}\n")
    return path


def completions(home: Path) -> list[str]:
    """Cell ids in the order their process ran to completion (any sweep)."""
    path = home / "runs" / "completions.log"
    return path.read_text().split() if path.exists() else []


def launches(run_dir: Path) -> list[int]:
    """The checkpoint step each launch of the cell started from."""
    path = run_dir / "launches.log"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def seed_mlflow_store(home: Path) -> None:
    """Give ``home`` an initialised (empty) MLflow SQLite store.

    Creating an MLflow store runs its schema migrations (many seconds on a busy
    machine), so the first test builds a template once, in the system temp folder keyed
    by MLflow's version, and every test copies it (the rename makes that safe for
    parallel workers).
    """
    import os
    import shutil
    import tempfile
    from importlib.metadata import version

    template = Path(tempfile.gettempdir()) / f"kappa-test-mlflow-{version('mlflow')}.db"
    if not template.exists():
        from mlflow import MlflowClient

        building = template.with_name(f"{template.name}.{os.getpid()}.tmp")
        MlflowClient(f"sqlite:///{building}").search_experiments()
        building.replace(template)
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, home / "mlflow.db")


def use_home(home: Path, monkeypatch: Any, *, cli: bool = False,
             backends: dict[str, str] | None = None) -> Path:
    """Make ``home`` this test's ``KAPPA_HOME``: a seeded MLflow store, short poll and
    retry waits, ``backends`` registered in this process and, with ``cli``, background
    schedulers started through ``sweep_cli.py`` (so they know the test backends too)."""
    from orchestrator.backends import BACKENDS

    seed_mlflow_store(home)
    monkeypatch.setenv("KAPPA_HOME", str(home))
    monkeypatch.setenv("KAPPA_POLL_INTERVAL", "0.05")
    monkeypatch.setenv("KAPPA_RETRY_BACKOFF", "0.05")
    if cli:
        monkeypatch.setenv("KAPPA_CLI", f"{sys.executable} {CLI}")
    for name, entry in (backends or {}).items():
        monkeypatch.setitem(BACKENDS, name, entry)
    return home
