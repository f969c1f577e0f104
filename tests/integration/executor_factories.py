"""The executors the conformance suite (test_executor_conformance.py) runs against.

An :class:`ExecutorFactory` says how to make one executor (a registered name and its
options, so a *new* process can make the same one with ``get_executor``) and what that
executor promises where promises differ (how many jobs fit at once, what a job asking for
no GPU sees in ``CUDA_VISIBLE_DEVICES``, how many GPUs a job may ask for).

:func:`factory_for` makes (or skips, with the reason) the factory for one parametrization:

* ``local``: always; two fake GPU ids, so GPU hiding and assignment are checked too.
* ``ray_jobs``: a local Ray head (tests/integration/ray_head.py), one per test module;
  skipped if Ray is not installed. Slow (Ray starts in 20-40 s on a loaded machine).
* ``slurm``: the local one-node SLURM of tests/integration/slurm_cluster.py (two fake GPUs);
  skipped with the reason where that module is missing or SLURM cannot start.

A new executor plug-in adds its own parametrization here.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from orchestrator.executors import Executor, get_executor

# Each executor's parametrization (ray: a head costs 20-40 s on a loaded machine, so slow).
PARAMS = [
    pytest.param("local", id="local"),
    pytest.param("ray_jobs", id="ray_jobs", marks=[pytest.mark.slow, pytest.mark.ray]),
    # The local SLURM is started once per machine (and shared with test_slurm_*.py);
    # its five tests take ~12 s.
    pytest.param("slurm", id="slurm"),
]


@dataclass(frozen=True)
class ExecutorFactory:
    """How to make one executor, and what it promises."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    # Jobs an idle executor takes at once (``capacity(0)``).
    capacity: int = 2
    # What a job asking for no GPU may see in CUDA_VISIBLE_DEVICES (None: unset).
    cpu_job_devices: tuple[str | None, ...] = ("",)
    # GPUs one job may ask for here (0: the GPU assignment is not checked).
    gpus: int = 0

    def make(self) -> Executor:
        """A fresh executor (as a new orchestrator process would make it)."""
        return get_executor(self.name, **self.options)


@contextlib.contextmanager
def factory_for(name: str) -> Iterator[ExecutorFactory]:
    """The factory for parametrization ``name``, its cluster up while in the block."""
    if name == "local":
        yield ExecutorFactory("local", {"max_parallel": 2, "gpus": ["0", "1"],
                                        "grace_period": 5.0}, capacity=2, gpus=2)
    elif name == "ray_jobs":
        pytest.importorskip("ray", reason="Ray is not installed")
        from ray_head import local_ray_head

        with local_ray_head(num_cpus=2) as address:
            # Ray sets no CUDA_VISIBLE_DEVICES for a driver that reserved no GPU.
            yield ExecutorFactory("ray_jobs", {"address": address, "max_parallel": 2},
                                  capacity=2, cpu_job_devices=(None, ""))
    elif name == "slurm":
        if importlib.util.find_spec("slurm_cluster") is None:
            pytest.skip("no tests/integration/slurm_cluster.py (the local SLURM) here")
        from slurm_cluster import SlurmUnavailable, local_slurm

        try:
            cluster = local_slurm()
        except SlurmUnavailable as exc:
            pytest.skip(f"SLURM unavailable: {exc}")
        yield ExecutorFactory("slurm", {"max_parallel": 2, "partition": cluster.partition},
                              capacity=2, gpus=cluster.fake_gpus)
    else:
        raise ValueError(f"no executor factory {name!r}")
