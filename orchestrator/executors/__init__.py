"""Executors: where a launch runs (local processes with GPU slots; Ray clusters).

:data:`EXECUTORS` maps a name to ``"module:Class"`` so that importing this package stays
cheap; :func:`get_executor` imports the one asked for and passes its options through.
A job id starts with its executor's prefix (:data:`JOB_ID_PREFIXES`), so
:func:`executor_for_job` can pick the executor that reattaches or cancels it.
"""

from __future__ import annotations

import importlib
from typing import Any

from orchestrator.errors import Problem, UserInputError, unknown_name
from orchestrator.executors.base import Executor, JobHandle, JobResources

EXECUTORS: dict[str, str] = {
    "local": "orchestrator.executors.local:LocalExecutor",
    "ray_jobs": "orchestrator.executors.ray_jobs:RayJobsExecutor",
}
# The prefix of every job id an executor hands out (see each executor's JOB_ID_PREFIX).
JOB_ID_PREFIXES: dict[str, str] = {"local:": "local", "ray-jobs:": "ray_jobs"}
# Options an executor cannot be made without, with how a ``kappa`` user supplies them.
REQUIRED_OPTIONS: dict[str, dict[str, str]] = {
    "ray_jobs": {"address": "pass --ray-address URL (the Ray dashboard, e.g. "
                            "http://head:8265) or set RAY_ADDRESS"},
}


def get_executor(name: str = "local", **options: Any) -> Executor:
    """The executor registered under ``name``; an unknown name lists the known ones.

    A required option that is missing or ``None`` (e.g. ray_jobs' ``address``) is a
    :class:`UserInputError` saying how to give it.
    """
    if name not in EXECUTORS:
        raise unknown_name("executor", name, EXECUTORS, location="executor")
    missing = [Problem(f"executor.{option}", f"the {name} executor needs {option}", fix=fix)
               for option, fix in REQUIRED_OPTIONS.get(name, {}).items()
               if options.get(option) is None]
    if missing:
        raise UserInputError(f"executor {name} is missing options", missing)
    module_name, _, attr = EXECUTORS[name].partition(":")
    executor: Executor = getattr(importlib.import_module(module_name), attr)(**options)
    return executor


def executor_name_for_job(job_id: str) -> str:
    """The name of the executor that handed out ``job_id`` (from its prefix).

    An id without a known prefix is a :class:`UserInputError`, never a guess.
    """
    for prefix, name in JOB_ID_PREFIXES.items():
        if job_id.startswith(prefix):
            return name
    raise UserInputError(f"no executor knows job '{job_id}'", [Problem(
        "job_id", "the job id has no known executor prefix", found=job_id,
        allowed=", ".join(JOB_ID_PREFIXES),
        fix="the registry holds a job id from another kappa version; cancel the job by hand")])


def executor_for_job(job_id: str, **options: Any) -> Executor:
    """The executor that can reattach (and cancel) ``job_id``, made with ``options``.

    Options the executor does not take are dropped, so one call site can offer every
    executor's options (``max_parallel``, ``address``); ``None`` values count as absent.
    """
    name = executor_name_for_job(job_id)
    return get_executor(name, **executor_options(name, **options))


def executor_options(name: str, **options: Any) -> dict[str, Any]:
    """The subset of ``options`` (without ``None`` values) that executor ``name`` takes."""
    if name not in EXECUTORS:
        raise unknown_name("executor", name, EXECUTORS, location="executor")
    import inspect

    module_name, _, attr = EXECUTORS[name].partition(":")
    accepted = inspect.signature(getattr(importlib.import_module(module_name), attr)).parameters
    kept = {k: v for k, v in options.items() if k in accepted and v is not None}
    for option in REQUIRED_OPTIONS.get(name, {}):
        kept.setdefault(option, None)  # so get_executor reports it missing
    return kept


__all__ = ["EXECUTORS", "JOB_ID_PREFIXES", "Executor", "JobHandle", "JobResources",
           "executor_for_job", "executor_name_for_job", "executor_options", "get_executor"]
