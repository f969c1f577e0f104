"""What a cell's job asks its executor for, and refusing cells no executor slot can hold.

:func:`job_resources` is the one place a cell's :class:`JobResources` are made (the loop submits
them, :func:`check_fit` judges them): from its stored :class:`~orchestrator.backends.base.Demand`
and the spec's ``resources`` (CPUs, hours). A cell asking for more than the executor can *ever* give
(more GPUs than the machine has, more than any node of a Ray cluster) would wait forever, silently
``pending``; so ``submit``, ``resume`` and ``canary`` ask :meth:`Executor.fits` about every distinct
request first and say what to change, before anything is written or launched.
"""

from __future__ import annotations

from collections.abc import Iterable

from orchestrator.backends.base import Demand
from orchestrator.errors import Problem, UserInputError
from orchestrator.executors.base import Executor, JobResources
from orchestrator.spec.model import Resources


def job_resources(demand: Demand, resources: Resources) -> JobResources:
    """What one launch of a cell of this ``demand`` asks its executor for: from its
    settings alone, never from a launch (which may fail for reasons of its moment)."""
    return JobResources(gpus=demand.gpus, nodes=demand.nodes,
                        cpus=max(resources.cpus, demand.min_cpus), hours=resources.hours,
                        self_placing=demand.self_placing)


def check_fit(cells: Iterable[tuple[str, Demand | None]], executor: Executor,
              resources: Resources) -> None:
    """Raise ``UserInputError`` if any ``(cell id, demand)`` asks for more than
    ``executor`` can ever give one job; one problem per distinct reason. A cell without
    a demand (never judged) is left to its launch, which fails it."""
    too_big: dict[str, list[str]] = {}
    verdicts: dict[JobResources, str | None] = {}  # a grid has few distinct requests
    for cell_id, demand in cells:
        if demand is None:
            continue
        need = job_resources(demand, resources)
        if need not in verdicts:
            verdicts[need] = executor.fits(need)
        why = verdicts[need]
        if why is not None:
            too_big.setdefault(why, []).append(cell_id)
    if not too_big:
        return
    problems = [Problem(
        "resources", f"{len(ids)} cell(s) could never start on the {executor.name} executor: {why}",
        found=f"cells {', '.join(i[:12] for i in ids[:3])}{', …' if len(ids) > 3 else ''}",
        fix="ask for fewer resources per cell (resources.cpus; the backend's GPU "
            "settings: device, verl's trainer.nnodes × n_gpus_per_node), or run where "
            "they exist (CUDA_VISIBLE_DEVICES; a bigger Ray cluster, or -E "
            "autoscaling=true for one that adds nodes on demand)") for why, ids in too_big.items()]
    raise UserInputError(
        f"cells ask for more than the {executor.name} executor can ever give one job", problems)
