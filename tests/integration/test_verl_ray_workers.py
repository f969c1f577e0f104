"""The plug-in is present in Ray worker processes (real local Ray on CPU).

Two routes, as in plugins/README.md: the installed ``verl.plugins`` entry point (any
process that imports verl loads it), and ``VERL_USE_EXTERNAL_MODULES=kappa_verl`` in the
runtime_env with entry points switched off. A control shows that without either route a
worker's registry lacks the estimator, so the two positive checks can fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("ray")
pytest.importorskip("verl")
pytest.importorskip("kappa_verl")

import ray

# In the default run: these are the proofs that the plug-in reaches Ray workers.
pytestmark = [pytest.mark.ray]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONWARNINGS": "ignore"}})
    try:
        yield
    finally:
        ray.shutdown()


@ray.remote(num_cpus=1)
def _estimator_in_worker() -> dict[str, Any]:
    import sys

    import verl  # noqa: F401
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    return {"registered": "reward_budget" in ADV_ESTIMATOR_REGISTRY,
            "plugin_module": "kappa_verl" in sys.modules, "pid": os.getpid()}


def test_entry_point_route(local_ray: None) -> None:
    result = ray.get(_estimator_in_worker.remote())
    assert result["pid"] != os.getpid()
    assert result == {**result, "registered": True, "plugin_module": True}


def test_external_modules_route(local_ray: None) -> None:
    env = {"VERL_USE_EXTERNAL_PLUGINS": "none", "VERL_USE_EXTERNAL_MODULES": "kappa_verl"}
    task = _estimator_in_worker.options(runtime_env={"env_vars": env})
    assert ray.get(task.remote())["registered"] is True


def test_control_without_either_route(local_ray: None) -> None:
    env = {"VERL_USE_EXTERNAL_PLUGINS": "none", "VERL_USE_EXTERNAL_MODULES": ""}
    task = _estimator_in_worker.options(runtime_env={"env_vars": env})
    assert ray.get(task.remote())["registered"] is False
