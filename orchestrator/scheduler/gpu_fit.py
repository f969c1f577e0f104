"""Refusing cells that need more GPUs than their executor can ever give one job.

The scheduler starts a cell when enough GPUs are free. A cell that needs more GPUs than
exist there would wait forever, silently ``pending``; so ``submit`` and ``resume`` check
every cell first and say what to change, before anything is written or launched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from orchestrator.backends.base import Backend
from orchestrator.errors import Problem, UserInputError
from orchestrator.executors.base import Executor


def check_gpus_fit(backend: Backend, cells: Iterable[tuple[str, Mapping[str, Any]]],
                   executor: Executor) -> None:
    """Raise ``UserInputError`` if any ``(cell id, settings)`` needs more GPUs per job than
    ``executor`` has (nothing to check when it has no fixed limit)."""
    most = executor.most_gpus()
    if most is None:
        return
    too_big: dict[int, list[str]] = {}
    for cell_id, settings in cells:
        need = backend.gpus(backend.settings_model.model_validate(settings))
        if need > most:
            too_big.setdefault(need, []).append(cell_id)
    if not too_big:
        return
    where = f"{most} GPU(s) visible to the {executor.name} executor"
    problems = [
        Problem(
            "resources.gpus",
            f"{len(ids)} cell(s) need {need} GPUs per job and could never start",
            found=f"{need} GPUs per job (cells {', '.join(i[:12] for i in ids[:3])}"
                  f"{', …' if len(ids) > 3 else ''}); {where}",
            allowed=f"at most {most} per job here",
            fix="run where enough GPUs are visible (CUDA_VISIBLE_DEVICES), on a cluster "
                "(--executor ray_jobs --ray-address ADDRESS), or ask for fewer GPUs per cell",
        )
        for need, ids in sorted(too_big.items())
    ]
    raise UserInputError("cells need more GPUs than this machine has", problems)
