"""The SLURM executor's batch scripts (golden files) and options, without a cluster.

Regenerate the golden scripts after an intended change with
``KAPPA_UPDATE_GOLDEN=1 pytest tests/unit/executors/test_slurm_script.py``.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.errors import UserInputError
from orchestrator.executors import JobResources, get_executor
from orchestrator.executors.slurm import SlurmExecutor, SlurmOptions
from orchestrator.executors.slurm_script import batch_script, time_limit_minutes

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "slurm"
RUN = Path("/runs/table2/3f9a1c")


def _script(resources: JobResources, argv: tuple[str, ...], **options: object) -> str:
    executor = SlurmExecutor(python="/opt/kappa/.venv/bin/python", **options)  # type: ignore[arg-type]
    job = executor.batch_job(argv, RUN, RUN / "train.log",
                             RUN / ".jobs" / "train.log.18e0c0ffee", resources)
    return batch_script(replace(job, wrapper=Path(
        "/opt/kappa/orchestrator/executors/job_wrapper.py")))


CASES = {
    # An embedded cell: one node, a few CPUs, no GPU, 0.5 h expected.
    "single_node_embedded.sbatch": lambda: _script(
        JobResources(gpus=0, nodes=1, cpus=4, hours=0.5),
        ("/opt/kappa/.venv/bin/python", "-m", "orchestrator.backends.embedded.train",
         "--config", str(RUN / "config.yaml"), "--out", str(RUN)),
        partition="cpu"),
    # A verl cell over two nodes of 8 GPUs: a Ray cluster over the allocation.
    "two_node_verl.sbatch": lambda: _script(
        JobResources(gpus=16, nodes=2, cpus=32, hours=6.0, self_placing=True),
        ("/opt/kappa/.venv/bin/python", "-m", "verl.trainer.main_ppo",
         "trainer.nnodes=2", "trainer.n_gpus_per_node=8",
         "trainer.experiment_name=table2 grpo seed 0"),
        partition="gpu", account="rl-lab", qos="normal", constraint="a100",
        sbatch_args="--mem=0 --exclusive"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_batch_scripts_match_golden_files(name: str) -> None:
    text = CASES[name]()
    path = GOLDEN / name
    if os.environ.get("KAPPA_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with KAPPA_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} changed; KAPPA_UPDATE_GOLDEN=1 if intended"
    # Whatever it says, it is valid bash.
    assert subprocess.run(["bash", "-n"], input=text, text=True, check=False).returncode == 0


def test_time_limit_has_a_margin_and_defaults() -> None:
    assert time_limit_minutes(1.0, 1.5, 10, None) == 100
    assert time_limit_minutes(0.001, 1.0, 0, None) == 1  # never 0 (= no limit)
    assert time_limit_minutes(None, 1.5, 10, 240) == 240
    assert time_limit_minutes(None, 1.5, 10, None) is None  # the partition's default


def test_options_are_validated_and_refuse_kappas_own_sbatch_flags() -> None:
    opts = SlurmOptions.model_validate({"sbatch_args": "--mem=8G --exclusive",
                                        "max_parallel": "3"})
    assert opts.sbatch_args == ("--mem=8G", "--exclusive") and opts.max_parallel == 3
    for bad in ({"sbatch_args": "--time=5"}, {"sbatch_args": "-N 2"},
                {"time_factor": 0.5}, {"partiton": "gpu"}):
        with pytest.raises(UserInputError) as err:
            get_executor("slurm", **bad)
        assert "executor." in err.value.render()


def test_a_multi_node_job_must_place_its_own_work(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="place its own work"):
        SlurmExecutor().submit(("true",), {}, tmp_path, tmp_path / "x.log",
                               JobResources(nodes=2, cpus=1))


def test_no_slurm_here_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch
    with pytest.raises(UserInputError, match="SLURM cannot be reached") as err:
        SlurmExecutor().fits(JobResources())
    assert "sbatch not found" in err.value.render()
