"""The one fake backend: its launch is a real process, :mod:`kit.fake_trainer`, which
writes its run folder through :mod:`orchestrator.runs`, checkpoints, resumes from its
checkpoint, and logs one of four metric curves (``curve``): a sweep's, a scripted
score for stop rules, a score that depends on searched settings, or a pure function of
(seed, step) for the fault suite. It honours stop requests (``fake``) or, as
``fake-deaf``, ignores them like a process that cannot be asked (verl), so the scheduler
must end it.

:func:`kit.home.use_home` registers both in the test process, :mod:`kit.kappa_main` in
``kappa`` subprocesses; :func:`write_spec` writes a spec of fake cells.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.backends.base import Backend, Demand, LaunchSpec

KIT = Path(__file__).resolve().parent
TRAINER = KIT / "fake_trainer.py"
PROBE = KIT / "interval_probe.py"
ENTRIES = {"fake": "kit.fake_backend:FakeBackend",
           "fake-deaf": "kit.fake_backend:DeafFakeBackend"}

Curve = Literal["sweep", "stop", "search", "fault"]
SEARCH_METRIC = "val/score"  # what the search curve logs
# What a spec of each curve runs unless told otherwise (the old per-curve backends' defaults).
CURVE_DEFAULTS: dict[str, dict[str, object]] = {
    "sweep": {"steps": 4},
    "stop": {"steps": 20, "step_seconds": 0.01},
    "search": {"steps": 6, "step_seconds": 0.01},
    "fault": {"steps": 8, "checkpoint_every": 3, "step_seconds": 0.05},
}


class FakeSettings(BaseModel):
    """What a fake cell does (its ``config.yaml``, which the fake trainer reads)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    curve: Curve = Field("sweep", description=(
        "What is logged: sweep: actor/entropy each step, final val-core/eval metrics; "
        "stop: `score` from `values` (and steps_done); search: val/score, peaking at "
        "x = 0.3 and shape = b; fault: a pure function of (seed, step), step 0 included"))
    steps: int = Field(4, ge=1)
    step_seconds: float = Field(0.02, ge=0)
    seed: int = 0
    checkpoint_every: int = Field(1, ge=1)
    fail_first: int = Field(0, ge=0, description="fail this many launches, then succeed")
    fail_at_step: int = Field(0, ge=0, description="crash when reaching this step (0: never)")
    hold_at: int = Field(0, ge=0, description="from this step on (0: never), wait before "
                         "each step until <run_dir>/go exists")
    hold_while: str | None = Field(
        None, description="A path: while it exists, the cell waits before each step (a test "
                          "decides when cells may end, whatever the machine's load).")
    # curve sweep
    baseline: str = Field("grpo", description="only shifts the fake eval metrics")
    reward_budget: bool = Field(False, description="adds 0.05 to the fake eval metrics")
    # curve stop
    values: list[float | str] = Field(
        default_factory=list,
        description="metric 'score' at steps 1, 2, ... (the last repeats; 'nan' for NaN)")
    # curve search
    x: float = Field(0.5, ge=0, le=1)
    lr: float = Field(0.01, gt=0)
    shape: str = "a"
    fall_after: int | None = Field(None, ge=1, description="The score falls after this step.")
    # what the job asks its executor for
    gpus: int = Field(0, ge=0, description="GPUs in all")
    nodes: int = Field(1, ge=1)
    self_placing: bool = False
    record_intervals: bool = Field(False, description="run under kit/interval_probe.py, "
                                   "which records when each launch ran (intervals.jsonl)")


class FakeBackend(Backend):
    """Launches the fake trainer in the run folder."""

    name: ClassVar[str] = "fake"
    settings_model = FakeSettings
    stops_itself: ClassVar[bool] = True

    def launch(self, settings: Mapping[str, Any], run_dir: Path, demand: Demand) -> LaunchSpec:
        argv: tuple[str, ...] = (sys.executable, str(TRAINER), str(run_dir / "config.yaml"),
                                 str(run_dir), "honour" if self.stops_itself else "ignore")
        if settings.get("record_intervals"):
            argv = (sys.executable, str(PROBE), str(run_dir), *argv)
        return LaunchSpec(argv=argv, env=dict(demand.env), gpus=demand.gpus)

    def gpus(self, settings: BaseModel) -> int:
        return int(getattr(settings, "gpus", 0))

    def nodes(self, settings: BaseModel) -> int:
        return int(getattr(settings, "nodes", 1))

    def self_placing(self, settings: BaseModel) -> bool:
        return bool(getattr(settings, "self_placing", False))

    def max_steps(self, settings: BaseModel) -> int | None:
        return int(getattr(settings, "steps", 0)) or None

    def canary_settings(self, settings: Mapping[str, Any], model: BaseModel) -> dict[str, Any]:
        """At most two steps (a cell failing later passes its canary, as on a real backend)."""
        assert isinstance(model, FakeSettings)
        return {**settings, "steps": min(model.steps, 2)}


class DeafFakeBackend(FakeBackend):
    """The same process, deaf to stop requests: the scheduler ends its job."""

    name: ClassVar[str] = "fake-deaf"
    stops_itself: ClassVar[bool] = False


def write_spec(path: Path, name: str, seeds: int = 4, retries: int = 0, *,
               curve: Curve = "sweep", **base: object) -> Path:
    """A spec of ``seeds`` fake cells of ``curve`` (axis ``seed``) with ``base`` settings
    over the curve's defaults."""
    return _write(path, name, base, curve=curve, seeds=seeds, retries=retries)


def stop_spec(path: Path, name: str, stop: str, *, backend: str = "fake",
              retries: int = 0, seeds: int = 1, resources: str = "", **base: object) -> Path:
    """A spec of ``seeds`` scripted cells (curve ``stop``) with the ``stop:`` block
    ``stop`` (YAML flow)."""
    return _write(path, name, base, curve="stop", seeds=seeds, retries=retries,
                  backend=backend, resources=resources, stop=stop)


def search_spec(path: Path, name: str, search: str, *, axes: str = "",
                **base: object) -> Path:
    """A search spec of the fake backend (curve ``search``); ``search`` is the block's
    YAML (indented 2), ``axes`` YAML flow."""
    return _write(path, name, base, curve="search", axes=axes, search=search)


def _write(path: Path, name: str, base: Mapping[str, object], *, curve: Curve,
           seeds: int | None = None, retries: int | None = None, backend: str = "fake",
           axes: str = "", resources: str = "", stop: str = "", search: str = "") -> Path:
    settings = {**CURVE_DEFAULTS[curve], **base}
    if curve != "sweep":
        settings = {"curve": curve, **settings}
    lines = "".join(f"  {k}: {json.dumps(v)}\n" for k, v in settings.items())
    text = f"name: {name}\nbackend: {backend}\n"
    text += f"retries: {retries}\n" if retries is not None else ""
    text += f"resources: {resources}\n" if resources else ""
    text += f"base:\n{lines}"
    text += f"axes: {axes}\n" if axes else ""
    text += f"axes:\n  seed: {list(range(seeds))}\n" if seeds is not None else ""
    text += f"stop: {stop}\n" if stop else ""
    text += f"search:\n{search}" if search else ""
    path.write_text(text)
    return path


def intervals(run_dir: Path) -> list[tuple[float, float]]:
    """When each launch in ``run_dir`` ran (``record_intervals``): (start, end) seconds."""
    path = run_dir / "intervals.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return [(float(r["start"]), float(r["end"])) for r in rows]
