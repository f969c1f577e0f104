"""A real one-node SLURM for the tests (scripts/slurm_local.sh), started once per machine.

Use it from a test module in tests/integration::

    from slurm_cluster import LocalSlurm, slurm_cluster_fixture  # noqa: F401 (fixture)

    def test_something(slurm_cluster: LocalSlurm) -> None:
        ...  # sbatch/squeue/scancel (and kappa's slurm executor) reach it now

The session-scoped fixture ``slurm_cluster`` (importing ``slurm_cluster_fixture``
brings it into a module) starts the cluster (or finds it running)
and sets ``SLURM_CONF`` in ``os.environ``, so every SLURM command this process or its
children run talks to it; where SLURM cannot start it skips the test with the reason
(not installed: run ``scripts/slurm_local.sh install`` as root, which ``make sysdeps``
does; a daemon failed: the tail of its log). Outside pytest, :func:`local_slurm` does the
same and raises :class:`SlurmUnavailable` with the reason instead of skipping.

The cluster: node = this host (127.0.0.1), ``cpus`` CPUs, two *fake* GPUs (SLURM counts
and assigns them and sets ``CUDA_VISIBLE_DEVICES``; no device is behind them),
partitions ``debug`` (default), ``preemptible`` and ``urgent`` (whose jobs preempt
those of ``preemptible``, never another test's ``debug`` jobs), no accounting
(``sacct`` says it is disabled). It lives in ``$KAPPA_SLURM_DIR`` (default
/tmp/kappa-slurm), is shared by every test process on the machine (xdist workers wait for
one another's start) and is left running afterwards: ``scripts/slurm_local.sh stop``
stops it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm_local.sh"
START_TIMEOUT_S = 180


class SlurmUnavailable(RuntimeError):
    """SLURM cannot run here; the message says why."""


@dataclass(frozen=True)
class LocalSlurm:
    """The running test cluster."""

    directory: Path
    conf: Path
    cpus: int
    fake_gpus: int = 2
    partition: str = "debug"
    # Jobs of ``urgent`` preempt jobs of ``preemptible`` (and nothing else).
    preemptible_partition: str = "preemptible"
    urgent_partition: str = "urgent"

    def env(self) -> dict[str, str]:
        """What a process needs in its environment to reach the cluster."""
        return {"SLURM_CONF": str(self.conf)}


@functools.cache
def _start() -> LocalSlurm | str:
    directory = Path(os.environ.get("KAPPA_SLURM_DIR", "/tmp/kappa-slurm"))
    cpus = int(os.environ.get("KAPPA_SLURM_CPUS", "4"))
    if shutil.which("bash") is None:
        return "no bash to run scripts/slurm_local.sh"
    try:
        proc = subprocess.run(["bash", str(SCRIPT), "start", str(directory)],
                              capture_output=True, text=True, timeout=START_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired:
        return f"scripts/slurm_local.sh start took over {START_TIMEOUT_S} s"
    if proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip().replace("\n", " | ")
        return f"local SLURM did not start (exit {proc.returncode}): {why}"
    return LocalSlurm(directory=directory, conf=directory / "slurm.conf", cpus=cpus)


def local_slurm() -> LocalSlurm:
    """The local test cluster, started if needed (once per process), with ``SLURM_CONF``
    set in ``os.environ``; :class:`SlurmUnavailable` says why it cannot run."""
    started = _start()
    if isinstance(started, str):
        raise SlurmUnavailable(started)
    os.environ.update(started.env())
    return started


@pytest.fixture(scope="session", name="slurm_cluster")
def slurm_cluster_fixture() -> Iterator[LocalSlurm]:
    """The local SLURM (see the module docstring); skips with the reason where it cannot
    start."""
    try:
        cluster = local_slurm()
    except SlurmUnavailable as exc:
        pytest.skip(f"SLURM unavailable: {exc}")
    yield cluster
