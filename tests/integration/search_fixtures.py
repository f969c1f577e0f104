"""A fake backend for search tests: its score depends on the searched settings, it logs
the score's rise step by step, and it honours stop requests (a pruner's) like the
embedded trainer. Register with ``BACKENDS["searchfake"] = SEARCH_ENTRY`` (``search_cli.py``
does that in subprocesses).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.backends.base import Backend, LaunchSpec

HERE = Path(__file__).resolve().parent
TRAINER = HERE / "search_fake_trainer.py"
CLI = HERE / "search_cli.py"
SEARCH_ENTRY = "search_fixtures:SearchFakeBackend"
METRIC = "val/score"


class SearchFakeSettings(BaseModel):
    """What a fake trial runs: its score peaks at ``x = 0.3`` and ``shape = b``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    x: float = Field(0.5, ge=0, le=1)
    lr: float = Field(0.01, gt=0)
    shape: str = "a"
    baseline: str = "grpo"
    steps: int = Field(6, ge=1)
    step_seconds: float = Field(0.01, ge=0)
    fall_after: int | None = Field(None, ge=1, description="The score falls after this step.")
    hold_while: str | None = Field(
        None, description="A path: while it exists, the trial waits before each step (a test "
                          "decides when trials may end, whatever the machine's load).")
    seed: int = 0


class SearchFakeBackend(Backend):
    """Launches ``search_fake_trainer.py``, which checks for a stop request each step."""

    name = "searchfake"
    settings_model = SearchFakeSettings
    stops_itself = True

    def max_steps(self, settings: BaseModel) -> int | None:
        assert isinstance(settings, SearchFakeSettings)
        return settings.steps

    def launch(self, settings: BaseModel, run_dir: Path) -> LaunchSpec:
        return LaunchSpec(argv=(sys.executable, str(TRAINER), str(run_dir / "config.yaml"),
                                str(run_dir)))


def search_spec(path: Path, name: str, search: str, *, axes: str = "",
                **base: object) -> Path:
    """A search spec of the fake backend; ``search`` is the block's YAML (indented 2)."""
    import json

    base_yaml = "".join(f"  {k}: {json.dumps(v)}\n" for k, v in base.items()) or "  steps: 6\n"
    extra = f"axes: {axes}\n" if axes else ""
    path.write_text(f"name: {name}\nbackend: searchfake\nbase:\n{base_yaml}{extra}"
                    f"search:\n{search}")
    return path
