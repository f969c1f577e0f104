"""The executor contract: *where* a launch runs (a local process, a Ray or SLURM job).

An executor starts an argv and hands back a :class:`JobHandle`, knowing nothing of cells or MLflow.
``submit`` returns at once (output appended to ``log_path``), reserving what it can of
:class:`JobResources`; a job id outlives the process (:meth:`Executor.reattach`), and
:meth:`Executor.fits` refuses cells that could never run. Plug-ins (entry point group
``kappa.executors``) declare ``name``, ``job_id_prefix`` and ``Options`` (set with
``-E KEY=VALUE``), and must pass tests/integration/test_executor_conformance.py."""

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
    """What one job asks for: ``gpus`` over all ``nodes``, ``cpus`` per node, ``hours`` of
    wall-clock time (``None``: unknown). ``self_placing``: the entrypoint is a driver that
    asks its cluster for the work's resources itself (verl's placement groups on Ray)."""

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
        """``None`` while running, else the exit code (negative: killed by that signal)."""

    @abstractmethod
    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the job ends (or ``timeout`` passes); the exit code or ``None``."""

    @abstractmethod
    def cancel(self) -> None:
        """Stop the job and its children. Safe to call twice."""


def poll_until(poll: Callable[[], int | None], timeout: float | None, first_delay: float,
               most_delay: float) -> int | None:
    """``poll()`` until it gives an exit code or ``timeout`` passes, with doubling sleeps."""
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
    def leaves(tp: Any) -> list[Any]:
        args = get_args(tp)
        if args and getattr(tp, "__metadata__", None) is not None:
            return leaves(args[0])  # Annotated[T, ...]: T
        return [leaf for arg in args for leaf in leaves(arg)] if args else [tp]

    found = leaves(annotation)  # not a set: a leaf may be unhashable (Callable's [args])
    return any(t in (int, float) for t in found) and all(
        t in (int, float, type(None)) for t in found)


class ExecutorOptions(BaseModel):
    """What a user may set on an executor: described fields, numbers finite and not bools."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, value in data.items():
                field = cls.model_fields.get(key)
                if isinstance(value, bool) and field and _numeric_only(field.annotation):
                    raise PydanticCustomError("bool_for_number", "{option}: a boolean is "
                                              "not a number", {"option": key})
        return data


class Executor(ABC):
    """Where launches run."""

    name: ClassVar[str]
    job_id_prefix: ClassVar[str] = ""  # starts every job id it hands out (``local:``)
    Options: ClassVar[type[ExecutorOptions]] = ExecutorOptions

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Hold every ``submit`` to the prefix rule (another executor would reattach a job id
        lacking it, find nothing, and run the cell twice): such a job is cancelled."""
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
                raise ValueError(f"executor {self.name!r} handed out job id {job_id!r}, which "
                                 f"lacks its prefix {self.job_id_prefix!r} (the job was cancelled)")
            return job

        checked._checks_prefix = True  # type: ignore[attr-defined]
        cls.submit = checked  # type: ignore[method-assign]

    @classmethod
    def from_options(cls, options: ExecutorOptions) -> Executor:
        """The executor made from validated ``options`` (default: as constructor keywords)."""
        return cls(**dict(options))

    @abstractmethod
    def submit(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: Path, log_path: Path,
               resources: JobResources = JobResources()) -> JobHandle:
        """Start ``argv`` in ``cwd`` with ``resources``, ``env`` added to the environment."""

    @abstractmethod
    def capacity(self, gpus: int = 0) -> int:
        """How many more jobs needing ``gpus`` GPUs could start right now."""

    def most_gpus(self) -> int | None:
        """The most GPUs one job can ever get here (``None``: no fixed limit known)."""
        return None

    def fits(self, resources: JobResources) -> str | None:
        """Why a job asking for ``resources`` could never run here, or ``None``."""
        most = self.most_gpus()
        if most is None or resources.gpus <= most:
            return None
        return (f"needs {resources.gpus} GPU(s) per job; {most} GPU(s) visible to the "
                f"{self.name} executor")

    @abstractmethod
    def reattach(self, job_id: str) -> JobHandle | None:
        """A handle to a job submitted earlier (by any process), if it still exists."""
