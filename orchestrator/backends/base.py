"""The backend contract: what a launch of one cell *is* (where it runs is the executor's business):
a cell's resolved settings as a process (an argv, never a shell string), and what that process
leaves in its run folder. Every backend honours:

* ``settings_model`` is a strict, frozen pydantic model; a cell is valid iff
  :meth:`~Backend.validate` returns (problems at the dotted setting names);
  :meth:`~Backend.preflight` checks a batch once per submit.
* :meth:`~Backend.demand` is judged where a cell is validated and stored with it (the scheduler
  validates nothing); :meth:`~Backend.launch` is pure: the process validates its settings,
  runs to completion in ``run_dir``, and run again there resumes.
* With ``MLFLOW_TRACKING_URI`` and ``MLFLOW_RUN_ID`` set, the process logs its metrics into
  that existing run (one batched call per step), never creating or ending a run.
* It leaves ``metrics.jsonl``, ``progress.json`` and, on success, ``summary.json`` (shapes:
  :mod:`orchestrator.runs.folder`), with verl's metric names (docs/architecture.md#metric-names).
* A process that honours a stop request (``stops_itself``, :mod:`orchestrator.runs.stop_request`)
  ends with a checkpoint, a final evaluation and a ``summary.json`` carrying ``"stopped"``; any
  other is ended by the scheduler and ``stopped_summary`` writes its summary from the last metrics.
* ``canary_settings(settings, model)``: the smallest run taking a full run's whole path (start,
  warm start or model load, rewards, a few optimizer steps, a checkpoint, the write-out), run by
  ``kappa canary`` (:mod:`orchestrator.sweeps.canary`). It must validate, keep every setting that
  decides which code runs, and keep the keys of caches shared with the full run. Default: unchanged.
* ``numerics_version`` is bumped whenever a change alters the numbers a run produces;
  :meth:`~Backend.numerics` adds the versions of the libraries computing them. The process records
  them and its machine (:mod:`orchestrator.runs.provenance`); other numerics' cells are stale."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from orchestrator.runs.folder import METRICS_FILE, read_progress, read_summary
from orchestrator.runs.metrics import MetricsRead, read_metrics_file
from orchestrator.runs.stop_request import StopRequest, synthesize_summary, write_stop_request


@dataclass(frozen=True)
class Demand:
    """What the scheduler needs of a cell, judged once (``Backend.demand``) and stored with
    it; the fields are the ``Backend`` methods of the same names (``steps`` 0: unknown)."""

    gpus: int = 0
    nodes: int = 1
    min_cpus: int = 1
    self_placing: bool = False
    steps: int = 0
    env: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON object the registry stores (:meth:`of` reads it back)."""
        return {f.name: getattr(self, f.name) for f in fields(self)} | {"env": dict(self.env)}

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> Demand:
        """A demand as :meth:`to_json` stored it."""
        return cls(gpus=int(stored["gpus"]), nodes=int(stored["nodes"]),
                   min_cpus=int(stored["min_cpus"]), self_placing=bool(stored["self_placing"]),
                   steps=int(stored["steps"]),
                   env={str(k): str(v) for k, v in dict(stored.get("env") or {}).items()})


@dataclass(frozen=True)
class LaunchSpec:
    """A process to start: argv (no shell), extra environment, and GPUs it needs."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    gpus: int = 0


class Backend(ABC):
    """What a launch of one cell is. See the module docstring for the contract."""

    name: ClassVar[str]
    settings_model: ClassVar[type[BaseModel]]
    #: Settings in cross-field rules: planning validates each value of any other setting
    #: once, and each distinct combination of these; ``None``: every cell (slower).
    coupled_settings: ClassVar[frozenset[str] | None] = None
    #: Settings that do not change which code a run executes: cells that differ only in
    #: these share one canary run (``kappa canary``).
    canary_free_settings: ClassVar[frozenset[str]] = frozenset({"seed"})
    #: Whether a launched process honours a stop request itself (module docstring).
    stops_itself: ClassVar[bool] = False
    #: Bumped whenever a change alters the numbers a run produces (module docstring).
    numerics_version: ClassVar[str] = "1"

    def numerics(self) -> dict[str, str]:
        """The numerics installed here: the backend, its version and its libraries' versions."""
        return {"backend": self.name, "version": self.numerics_version}

    def known_metrics(self) -> frozenset[str] | None:
        """Every metric a run logs, as globs (``val-core/*/acc/mean@1``): a stopping rule on
        another is refused. ``None``: unknown (a plug-in may log its own), only warned about."""
        return None

    def validate(self, settings: Mapping[str, Any]) -> BaseModel:
        """The validated settings model, or ``UserInputError`` with all problems."""
        from orchestrator.backends.validation import validate_model

        return validate_model(self.settings_model, settings, what=f"{self.name} settings")

    def preflight(self, cells: Mapping[str, BaseModel]) -> None:
        """Check validated settings (by label) against what will run them: one
        ``UserInputError`` at ``<label>.<setting>`` (label ``""``: the bare setting)."""
        return None

    @abstractmethod
    def launch(self, settings: Mapping[str, Any], run_dir: Path, demand: Demand) -> LaunchSpec:
        """The process that trains this cell in ``run_dir`` (resuming if it was started)."""

    def demand(self, settings: BaseModel) -> Demand:
        """What the scheduler needs of a cell with these validated settings."""
        return Demand(gpus=self.gpus(settings), nodes=self.nodes(settings),
                      min_cpus=self.min_cpus(settings),
                      self_placing=self.self_placing(settings),
                      steps=self.max_steps(settings) or 0, env=self.launch_env(settings))

    def launch_env(self, settings: BaseModel) -> dict[str, str]:
        """The cell-wide environment of a launch of these settings (none by default)."""
        return {}

    def gpus(self, settings: BaseModel) -> int:
        """GPUs one launch of these settings needs in all (0 for CPU-only)."""
        return 0

    def nodes(self, settings: BaseModel) -> int:
        """Machines one launch of these settings spans (its GPUs spread evenly over them)."""
        return 1

    def self_placing(self, settings: BaseModel) -> bool:
        """Whether a launch is a driver that asks its cluster for the resources itself
        (verl's Ray placement groups), so an executor reserves none for it."""
        return False

    def min_cpus(self, settings: BaseModel) -> int:
        """CPUs per node a launch cannot run with fewer of, whatever ``resources.cpus`` says."""
        return 1

    def max_steps(self, settings: BaseModel) -> int | None:
        """Training steps a launch runs at most, if known (hyperband's largest resource)."""
        steps = getattr(settings, "max_steps", None)
        return steps if isinstance(steps, int) and steps > 0 else None

    def canary_settings(self, settings: Mapping[str, Any], model: BaseModel) -> dict[str, Any]:
        """The canary of ``settings`` (module docstring); ``model``: them validated."""
        return dict(settings)

    # Reading results back is the same for every backend that follows the file contract.
    def read_progress(self, run_dir: Path) -> tuple[int, int] | None:
        """``(step, total_steps)`` of a running or finished launch, if it reported any."""
        return read_progress(run_dir)

    def read_summary(self, run_dir: Path) -> dict[str, Any] | None:
        """The final summary written on success, or ``None``."""
        return read_summary(run_dir)

    def read_metrics(self, run_dir: Path, cursor: Any = None) -> MetricsRead:
        """The metrics logged since ``cursor`` (``None``: from the start), non-finite ones
        included (the stopping rules' input); pass the returned cursor back."""
        return read_metrics_file(run_dir / METRICS_FILE, cursor)

    def request_stop(self, run_dir: Path, request: StopRequest) -> None:
        """Ask the launch running in ``run_dir`` to end early (written atomically)."""
        write_stop_request(run_dir, request)

    def stopped_summary(self, run_dir: Path, request: StopRequest) -> dict[str, Any]:
        """Write and return the ``summary.json`` of a launch the scheduler stopped: every
        metric's last value, at its last reported step."""
        progress = self.read_progress(run_dir)
        return synthesize_summary(run_dir, request, progress[0] if progress else None)
