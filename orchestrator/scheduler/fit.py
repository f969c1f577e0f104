"""What a cell's job asks its executor for, and refusing cells no executor slot can hold.

:func:`job_resources` is the one place a cell's :class:`JobResources` are made (the loop
submits them; :func:`check_fit` judges them), from the backend (GPUs, nodes,
whether it places its own work) and the spec's ``resources`` (CPUs, hours).

The scheduler starts a cell when its executor has room. A cell asking for more than the
executor can *ever* give (more GPUs than the machine has, more CPUs or GPUs than any
node of a Ray cluster, more GPU nodes than the cluster has) would wait forever, silently
``pending``; so ``submit``, ``resume`` and ``canary`` ask :meth:`Executor.fits` about
every distinct request first and say what to change, before anything is written or
launched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from orchestrator.backends.base import Backend
from orchestrator.errors import Problem, UserInputError
from orchestrator.executors.base import Executor, JobResources
from orchestrator.spec.model import Resources


def job_resources(backend: Backend, settings: BaseModel, resources: Resources) -> JobResources:
    """What one launch of a cell with validated ``settings`` asks its executor for: from
    the settings alone (the backend's ``gpus``/``nodes``/``self_placing``), never from a
    launch, which may fail for reasons of its moment (a launch-time failure is a failed
    attempt the cell's retries cover, not a submit error)."""
    return JobResources(gpus=backend.gpus(settings), nodes=backend.nodes(settings),
                        cpus=max(resources.cpus, backend.min_cpus(settings)),
                        hours=resources.hours,
                        self_placing=backend.self_placing(settings))


def check_fit(backend: Backend, cells: Iterable[tuple[str, Mapping[str, Any]]],
              executor: Executor, resources: Resources) -> None:
    """Raise ``UserInputError`` if any ``(cell id, settings)`` asks for more than
    ``executor`` can ever give one job; one problem per distinct reason."""
    too_big: dict[str, list[str]] = {}
    verdicts: dict[JobResources, str | None] = {}  # a grid has few distinct requests
    for cell_id, settings in cells:
        need = job_resources(backend, backend.settings_model.model_validate(settings),
                             resources)
        if need not in verdicts:
            verdicts[need] = executor.fits(need)
        why = verdicts[need]
        if why is not None:
            too_big.setdefault(why, []).append(cell_id)
    if not too_big:
        return
    problems = [
        Problem(
            "resources",
            f"{len(ids)} cell(s) could never start on the {executor.name} executor: {why}",
            found=f"cells {', '.join(i[:12] for i in ids[:3])}{', …' if len(ids) > 3 else ''}",
            fix="ask for fewer resources per cell (resources.cpus; the backend's GPU "
                "settings: device, verl's trainer.nnodes × n_gpus_per_node), or run where "
                "they exist (CUDA_VISIBLE_DEVICES; a bigger Ray cluster, or -E "
                "autoscaling=true for one that adds nodes on demand)",
        )
        for why, ids in too_big.items()
    ]
    raise UserInputError(
        f"cells ask for more than the {executor.name} executor can ever give one job", problems)
