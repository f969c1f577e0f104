"""The Ray Jobs executor is registered: ``get_executor("ray_jobs", address=...)``.

Fast (no cluster); the slow test_ray_jobs_executor.py drives the registered executor
against a real local Ray head.
"""

from __future__ import annotations

import pytest

pytest.importorskip("ray")

from ray_head import free_port

from orchestrator.errors import UserInputError
from orchestrator.executors import EXECUTORS, get_executor
from orchestrator.executors.ray_client import RayJobsError
from orchestrator.executors.ray_jobs import DEFAULT_ENV, RayJobsExecutor, is_transient_refusal


def test_ray_jobs_is_registered() -> None:
    assert EXECUTORS["ray_jobs"] == "orchestrator.executors.ray_jobs:RayJobsExecutor"
    with pytest.raises(UserInputError, match="ray_jobs"):
        get_executor("ray-jobs")  # the error lists the known names


def test_get_executor_reaches_for_the_cluster_address() -> None:
    address = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(RayJobsError, match=address):
        get_executor("ray_jobs", address=address)


def test_job_env_lets_verl_repeat_its_keys_in_ray_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's ray.init repeats keys of the job's runtime_env; Ray needs the override flag."""
    monkeypatch.setenv("MLFLOW_RUN_ID", "abc")
    executor = object.__new__(RayJobsExecutor)  # runtime_env needs no cluster
    executor.forward_prefixes = ("MLFLOW_",)
    env_vars = executor.job_env({"KAPPA_ENTROPY_REWARD_COEF": "0.01"})
    assert env_vars == {**env_vars, "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1", "MLFLOW_RUN_ID": "abc",
                        "VERL_USE_EXTERNAL_MODULES": "kappa_verl",
                        "KAPPA_ENTROPY_REWARD_COEF": "0.01"}
    assert DEFAULT_ENV["RAY_OVERRIDE_JOB_RUNTIME_ENV"] == "1"


def test_a_starting_cluster_is_retried_other_refusals_are_not() -> None:
    # The message a fresh head returned in a real run (tests/integration, loaded machine).
    starting = RuntimeError("Request failed with status code 500: No available agent to "
                            "submit job, please try again later..")
    assert is_transient_refusal(starting)
    assert not is_transient_refusal(RuntimeError("Job with submission_id x already exists"))
