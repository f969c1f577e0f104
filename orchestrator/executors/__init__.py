"""Executors: where a launch runs (local processes with GPU slots; Ray clusters).

:data:`EXECUTORS` maps a name to ``"module:Class"`` so that importing this package stays
cheap; :func:`get_executor` imports the one asked for and passes its options through.
"""

from __future__ import annotations

import importlib
from typing import Any

from orchestrator.errors import unknown_name
from orchestrator.executors.base import Executor, JobHandle

EXECUTORS: dict[str, str] = {
    "local": "orchestrator.executors.local:LocalExecutor",
    "ray_jobs": "orchestrator.executors.ray_jobs:RayJobsExecutor",
}


def get_executor(name: str = "local", **options: Any) -> Executor:
    """The executor registered under ``name``; an unknown name lists the known ones."""
    if name not in EXECUTORS:
        raise unknown_name("executor", name, EXECUTORS, location="executor")
    module_name, _, attr = EXECUTORS[name].partition(":")
    executor: Executor = getattr(importlib.import_module(module_name), attr)(**options)
    return executor


__all__ = ["EXECUTORS", "Executor", "JobHandle", "get_executor"]
