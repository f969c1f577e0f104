"""The executor contract: *where* a launch runs.

An executor starts a :class:`~orchestrator.backends.LaunchSpec` somewhere (a local
process with GPU slots, a Ray cluster) and hands back a :class:`JobHandle`. It knows
nothing about cells, sweeps or MLflow.

Contract
--------
* ``submit`` returns quickly; the job runs in the background. The job's stdout and
  stderr go (appended) to ``log_path``. ``env`` is added to the executor's environment.
  ``resources`` (:class:`JobResources`) is what the job asks for: GPUs in all, nodes,
  CPUs per node, expected hours, and whether the entrypoint places its own work (a verl
  driver asking Ray for placement groups) or *is* the work (an embedded trainer). An
  executor reserves what it can express and refuses (raises) what it can never give.
* ``JobHandle.poll()`` never blocks: ``None`` while running, else the exit code
  (0 = success; a negative code means killed by that signal).
* ``JobHandle.cancel()`` stops the job and whatever it started; it is idempotent.
* ``JobHandle.job_id`` is a string that :meth:`Executor.reattach` can turn back into a
  handle from another process (e.g. after the orchestrator was killed), or ``None`` if
  the job is gone.
* ``capacity()`` says how many more jobs needing ``gpus`` GPUs could start now.
* ``most_gpus()`` is the most GPUs one job can ever get (``None`` if no fixed limit is
  known); the scheduler refuses, up front, cells that need more instead of waiting
  forever for a slot that cannot open. ``fits(resources)`` generalises it: why a job
  asking for ``resources`` could never run here (``None``: it could, or unknown).

Plug-ins
--------
An executor is registered under its ``name`` as an entry point of group
``kappa.executors`` (``name = "package.module:Class"``). The class declares its
``name``, the ``job_id_prefix`` every job id it hands out starts with (so the executor
of a recorded job can be found again) and its ``Options``: a frozen pydantic model
(``extra="forbid"``) of what a user may set (``kappa executors`` lists them, ``-E
KEY=VALUE`` sets them). :meth:`Executor.from_options` makes the executor from validated
options; by default it passes them to the constructor as keywords. Every executor must
pass tests/integration/test_executor_conformance.py.
"""

from __future__ import annotations

import contextlib
import functools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, get_args

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError


@dataclass(frozen=True)
class JobResources:
    """What one job asks its executor for.

    ``gpus`` counts every GPU over all ``nodes``; ``cpus`` is per node; ``hours`` is the
    expected wall-clock time (``None``: unknown), from which an executor with time limits
    derives one with a margin. ``self_placing`` means the entrypoint is only a driver that
    asks its cluster for the real work's resources itself (verl's placement groups on
    Ray), so an executor reserves nothing for the entrypoint beyond a place to run.
    """

    gpus: int = 0
    nodes: int = 1
    cpus: int = 1
    hours: float | None = None
    self_placing: bool = False

    @property
    def gpus_per_node(self) -> int:
        """GPUs on each node (``gpus`` spread evenly over ``nodes``)."""
        return self.gpus // max(1, self.nodes)


class JobHandle(ABC):
    """One submitted job."""

    job_id: str

    @abstractmethod
    def poll(self) -> int | None:
        """``None`` while running, else the exit code."""

    @abstractmethod
    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the job ends (or ``timeout`` seconds pass); the exit code or ``None``."""

    @abstractmethod
    def cancel(self) -> None:
        """Stop the job and its children. Safe to call twice."""


def poll_until(poll: Callable[[], int | None], timeout: float | None, first_delay: float,
               most_delay: float) -> int | None:
    """Call ``poll`` until it gives an exit code or ``timeout`` seconds pass (``None``
    then), sleeping ``first_delay`` seconds between calls at first, twice as long after
    each call, up to ``most_delay``: what every handle's ``wait`` does."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = first_delay
    while (code := poll()) is None:
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2, most_delay)
    return code


def _numeric_only(annotation: Any) -> bool:
    """Whether a field of type ``annotation`` holds only numbers (``int``, ``float | None``,
    ``Annotated[int, ...]``), where a boolean would be read as 0 or 1."""
    leaves: list[Any] = []
    pending = [annotation]
    while pending:
        current = pending.pop()
        args = get_args(current)
        if args and getattr(current, "__metadata__", None) is not None:
            pending.append(args[0])  # Annotated[T, ...]: T
        elif args:
            pending.extend(args)
        else:
            leaves.append(current)
    numbers = {int, float}
    return any(leaf in numbers for leaf in leaves) and all(
        leaf in numbers or leaf is type(None) for leaf in leaves)


class ExecutorOptions(BaseModel):
    """What a user may set on an executor (base: nothing). Subclasses add fields with a
    ``description`` each; a field may carry ``json_schema_extra={"fix": ...}``, the fix
    shown when it is missing or invalid.

    Numbers must be finite (``inf``/``nan`` are refused: no option means "forever"), and
    a boolean is no number (``true`` for a count is refused, not read as 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, value in data.items():
                field = cls.model_fields.get(key) if isinstance(key, str) else None
                if isinstance(value, bool) and field is not None \
                        and _numeric_only(field.annotation):
                    raise PydanticCustomError(
                        "bool_for_number", "{option}: a boolean is not a number",
                        {"option": key})
        return data


class Executor(ABC):
    """Where launches run."""

    name: ClassVar[str]
    # Every job id this executor hands out starts with it (e.g. ``local:``).
    job_id_prefix: ClassVar[str] = ""
    Options: ClassVar[type[ExecutorOptions]] = ExecutorOptions

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Hold every ``submit`` to the prefix rule: a job id without this executor's
        ``job_id_prefix`` (a plug-in handing out another executor's ``local:`` ids) would
        be reattached or cancelled by that other executor, which finds nothing and has
        the cell run a second time while the job still runs. Such a job is cancelled and
        the submit fails."""
        super().__init_subclass__(**kwargs)
        submit = cls.__dict__.get("submit")
        if submit is None or getattr(submit, "_checks_prefix", False):
            return

        @functools.wraps(submit)
        def checked(self: Executor, *args: Any, **kw: Any) -> JobHandle:
            job = submit(self, *args, **kw)
            job_id = getattr(job, "job_id", None)
            if not isinstance(job_id, str) or not job_id.startswith(self.job_id_prefix):
                with contextlib.suppress(Exception):
                    job.cancel()
                raise ValueError(f"executor {self.name!r} handed out job id {job_id!r}, "
                                 f"which lacks its prefix {self.job_id_prefix!r} (the job "
                                 "was cancelled)")
            return job

        checked._checks_prefix = True  # type: ignore[attr-defined]
        cls.submit = checked  # type: ignore[method-assign]

    @classmethod
    def from_options(cls, options: ExecutorOptions) -> Executor:
        """The executor made from validated ``options`` (default: as constructor
        keywords)."""
        kwargs: dict[str, Any] = dict(options)
        return cls(**kwargs)

    @abstractmethod
    def submit(
        self,
        argv: tuple[str, ...],
        env: Mapping[str, str],
        cwd: Path,
        log_path: Path,
        resources: JobResources = JobResources(),
    ) -> JobHandle:
        """Start ``argv`` in ``cwd`` with ``resources`` and return its handle."""

    @abstractmethod
    def capacity(self, gpus: int = 0) -> int:
        """How many more jobs needing ``gpus`` GPUs could start right now."""

    def most_gpus(self) -> int | None:
        """The most GPUs one job can ever get here; ``None`` when no fixed limit is known
        (e.g. a cluster that may grow)."""
        return None

    def fits(self, resources: JobResources) -> str | None:
        """Why a job asking for ``resources`` could never run here (a sentence naming
        what it asks and what there is), or ``None`` if it could or nothing is known. The
        default judges GPUs against :meth:`most_gpus`."""
        most = self.most_gpus()
        if most is None or resources.gpus <= most:
            return None
        return (f"needs {resources.gpus} GPU(s) per job; {most} GPU(s) visible to the "
                f"{self.name} executor")

    @abstractmethod
    def reattach(self, job_id: str) -> JobHandle | None:
        """A handle to a job submitted earlier (possibly by another process), if it still exists."""
