"""The executor contract: *where* a launch runs (a local process, a Ray or SLURM job).

An executor starts an argv somewhere and hands back a :class:`JobHandle`; it knows
nothing about cells, sweeps or MLflow. ``submit`` returns quickly (the job runs in the
background, its output appended to ``log_path``); an executor reserves what it can
express of :class:`JobResources` and refuses (raises) what it can never give. A job id
survives the process: :meth:`Executor.reattach` turns it back into a handle after the
orchestrator was killed. The scheduler refuses up front, through :meth:`Executor.fits`,
cells that could never run instead of waiting forever for a slot that cannot open.

Plug-ins register under entry point group ``kappa.executors`` and declare ``name``,
``job_id_prefix`` (so a recorded job's executor is found again) and ``Options`` (a frozen
pydantic model, ``extra="forbid"``, set with ``-E KEY=VALUE``). Every executor must pass
tests/integration/test_executor_conformance.py.
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
    """What one job asks its executor for: ``gpus`` over all ``nodes``, ``cpus`` per node,
    ``hours`` of wall-clock time (``None``: unknown). ``self_placing``: the entrypoint is
    only a driver that asks its cluster for the real work's resources itself (verl's
    placement groups on Ray), so an executor reserves nothing for it beyond a place to run.
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
        """``None`` while running, else the exit code (negative: killed by that signal).
        Never blocks."""

    @abstractmethod
    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the job ends (or ``timeout`` seconds pass); the exit code or ``None``."""

    @abstractmethod
    def cancel(self) -> None:
        """Stop the job and its children. Safe to call twice."""


def poll_until(poll: Callable[[], int | None], timeout: float | None, first_delay: float,
               most_delay: float) -> int | None:
    """Call ``poll`` until it gives an exit code or ``timeout`` seconds pass (``None``
    then), the sleep between calls doubling from ``first_delay`` up to ``most_delay``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = first_delay
    while (code := poll()) is None:
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2, most_delay)
    return code


def _numeric_only(annotation: Any) -> bool:
    """Whether a field of type ``annotation`` holds only numbers (``float | None``,
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
    ``description`` each, and may give one ``json_schema_extra={"fix": ...}``. Numbers
    must be finite (no option means "forever"), and a boolean is no number."""

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
        """The executor made from validated ``options`` (default: as constructor keywords)."""
        kwargs: dict[str, Any] = dict(options)
        return cls(**kwargs)

    @abstractmethod
    def submit(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: Path, log_path: Path,
               resources: JobResources = JobResources()) -> JobHandle:
        """Start ``argv`` in ``cwd`` with ``resources`` (``env`` added to the executor's
        environment) and return its handle."""

    @abstractmethod
    def capacity(self, gpus: int = 0) -> int:
        """How many more jobs needing ``gpus`` GPUs could start right now."""

    def most_gpus(self) -> int | None:
        """The most GPUs one job can ever get here; ``None`` when no fixed limit is known
        (e.g. a cluster that may grow)."""
        return None

    def fits(self, resources: JobResources) -> str | None:
        """Why a job asking for ``resources`` could never run here (a sentence naming
        what it asks and what there is), or ``None`` if it could or nothing is known."""
        most = self.most_gpus()
        if most is None or resources.gpus <= most:
            return None
        return (f"needs {resources.gpus} GPU(s) per job; {most} GPU(s) visible to the "
                f"{self.name} executor")

    @abstractmethod
    def reattach(self, job_id: str) -> JobHandle | None:
        """A handle to a job submitted earlier (possibly by another process), if it still exists."""
