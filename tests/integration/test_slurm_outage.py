"""The SLURM controller goes away and comes back, on the real local SLURM.

The shared test cluster is not stopped (other tests use it): this test's SLURM commands
read a configuration of their own (``SLURM_CONF``), which it points at a port nobody
listens on and back, so sbatch and squeue really fail to connect ("Unable to contact
slurm controller (connect failure)") and really connect again. While the controller is
away a running job keeps running and is not taken for ended; a submit waits it out (up
to ``SUBMIT_RETRY_S``) and then fails as :class:`SlurmUnreachable`, a
``ConnectionError``, never as a refusal of the job, and leaves no job behind.
"""

from __future__ import annotations

import re
import subprocess
import threading
from pathlib import Path

import pytest
from slurm_cluster import LocalSlurm, slurm_cluster_fixture  # noqa: F401 (fixture)

from orchestrator.executors import slurm as slurm_module
from orchestrator.executors.base import JobResources
from orchestrator.executors.slurm import SlurmExecutor, SlurmJob
from orchestrator.executors.slurm_queue import SlurmUnreachable
from orchestrator.tracking.retry import is_unreachable

pytestmark = pytest.mark.slow  # each call to an absent controller takes SLURM ~9 s


class Controller:
    """This test's view of the controller: reachable or not, by its configuration."""

    def __init__(self, conf: Path, own: Path) -> None:
        self.good = conf.read_text()
        self.bad = re.sub(r"(?m)^SlurmctldPort=.*$", "SlurmctldPort=1", self.good)
        self.own = own
        self.up()

    def up(self) -> None:
        self.own.write_text(self.good)

    def down(self) -> None:
        self.own.write_text(self.bad)


def test_an_absent_controller_ends_no_job_and_a_submit_waits_or_says_unreachable(
        slurm_cluster: LocalSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    controller = Controller(slurm_cluster.conf, tmp_path / "slurm.conf")
    monkeypatch.setenv("SLURM_CONF", str(controller.own))
    executor = SlurmExecutor(partition=slurm_cluster.partition)
    running = executor.submit(("sleep", "20"), {}, tmp_path / "a", tmp_path / "a" / "log",
                              JobResources(cpus=1, hours=0.1))
    assert running.wait(0.5) is None

    controller.down()
    assert running.poll() is None  # squeue fails: still running, not ended
    # A submit while it is away waits; the controller is back before the retries end.
    done: list[SlurmJob] = []
    thread = threading.Thread(target=lambda: done.append(executor.submit(
        ("true",), {}, tmp_path / "b", tmp_path / "b" / "log", JobResources(cpus=1))))
    thread.start()
    thread.join(3.0)
    controller.up()
    thread.join(120)
    assert done and done[0].wait(120) == 0
    assert running.wait(120) == 0  # the job ran through the outage

    # Away for longer than submit waits: unreachable, a ConnectionError; no job left.
    monkeypatch.setattr(slurm_module, "SUBMIT_RETRY_S", 0.0)
    controller.down()
    with pytest.raises(SlurmUnreachable) as err:
        executor.submit(("true",), {}, tmp_path / "c", tmp_path / "c" / "log",
                        JobResources(cpus=1))
    assert is_unreachable(err.value)
    controller.up()
    listing = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%k"],
                             capture_output=True, text=True, check=True, timeout=60).stdout
    assert str(tmp_path / "c") not in listing
