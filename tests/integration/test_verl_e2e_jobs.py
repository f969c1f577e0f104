"""End to end, as far as a machine without GPUs allows: kappa's verl command via Ray Jobs.

A real local Ray cluster (head + dashboard) runs, as a Ray *job* submitted by
:class:`RayJobsExecutor`, a probe that does what the start of a real verl run does:

1. ``python -m verl.trainer.main_ppo --cfg job <kappa's overrides>`` composes verl's
   config (Hydra) with ``algorithm.adv_estimator=reward_budget`` and kappa's reward
   function and reward kwargs, and exits (training itself needs vLLM/SGLang and GPUs);
2. ``import verl`` in the job's driver loads the plug-in; a Ray task in a worker of the
   same cluster sees ``reward_budget`` in verl's registry;
3. verl's own ``Tracking(default_backend=["mlflow"])`` attaches to the MLflow run created
   beforehand (``MLFLOW_RUN_ID``, passed through the job's runtime_env) and logs a metric.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("verl")
pytest.importorskip("mlflow")
pytest.importorskip("kappa_verl")

from ray_head import local_ray_head

from orchestrator.executors.ray_jobs import RayJobsExecutor

# In the default run: the end-to-end proof that a verl cell goes through the Ray Jobs API.
pytestmark = [pytest.mark.ray]

PROBE = '''
import subprocess, sys
import kappa_verl

overrides = [
    "algorithm.adv_estimator=reward_budget",
    "actor_rollout_ref.rollout.name=vllm",
    f"reward.custom_reward_function.path={kappa_verl.reward_function_path()}",
    "reward.custom_reward_function.name=compute_score",
    "+reward.custom_reward_function.reward_kwargs.reward_correct=5.0",
    "+reward.custom_reward_function.reward_kwargs.reward_type=verifier",
    "trainer.logger=[console,mlflow]",
]
out = subprocess.run([sys.executable, "-m", "verl.trainer.main_ppo", "--cfg", "job", *overrides],
                     capture_output=True, text=True)
print("COMPOSE_RC", out.returncode)
print(out.stdout[-20000:])
print(out.stderr[-3000:], file=sys.stderr)

import ray, verl
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
print("DRIVER_REGISTERED", "reward_budget" in ADV_ESTIMATOR_REGISTRY)
ray.init()

@ray.remote(num_cpus=1)
def in_worker():
    import verl
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    return "reward_budget" in ADV_ESTIMATOR_REGISTRY

print("WORKER_REGISTERED", ray.get(in_worker.remote()))
from verl.utils.tracking import Tracking
tracker = Tracking(project_name="kappa-e2e", experiment_name="probe",
                   default_backend=["mlflow"],
                   config={"algorithm": {"adv_estimator": "reward_budget"}})
tracker.log({"kappa/e2e_probe": 1.0}, step=1)
import mlflow
mlflow.end_run()
print("MLFLOW_LOGGED")
'''


def test_verl_command_through_ray_jobs(tmp_path: Path) -> None:
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("kappa-e2e")
    run_id = client.create_run(experiment).info.run_id
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    log = tmp_path / "job.log"

    with local_ray_head() as address:
        executor = RayJobsExecutor(address)
        job = executor.submit((sys.executable, str(probe)),
                              {"MLFLOW_TRACKING_URI": uri, "MLFLOW_RUN_ID": run_id,
                               "PYTHONWARNINGS": "ignore"}, tmp_path, log)
        code = job.wait(timeout=900)
    text = log.read_text()
    assert code == 0, text[-5000:]
    assert "COMPOSE_RC 0" in text
    assert "adv_estimator: reward_budget" in text
    assert "kappa_verl/rewards.py" in text and "reward_correct: 5.0" in text
    assert "DRIVER_REGISTERED True" in text
    assert "WORKER_REGISTERED True" in text
    assert "MLFLOW_LOGGED" in text
    mlflow.set_tracking_uri(uri)
    run = client.get_run(run_id)
    assert run.data.metrics.get("kappa/e2e_probe") == 1.0
    assert run.data.params.get("algorithm/adv_estimator") == "reward_budget"
    assert len(client.search_runs([experiment])) == 1  # attached, no new run
