"""kappa's real scheduler on a small simulated cluster (bench/_sim_cluster.py: a fake
executor with a virtual clock): every cell runs exactly once, never more GPUs are busy
than exist, and no makespan beats the lower bound. Timings are not asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _sim_cluster import draw_cells, simulate

SEED = 7


@pytest.mark.parametrize("order", ["kappa", "fifo"])
def test_simulated_sweep_runs_every_cell_once_within_the_cluster(order: str) -> None:
    print(f"seed {SEED}")
    cells = draw_cells(40, SEED, "steps")
    result = simulate(cells, [8, 8], order)
    cluster = result.cluster
    assert result.counts["succeeded"] == 40 and sum(result.counts.values()) == 40
    # One submit per cell, each into its own run folder.
    assert len(cluster.submits) == 40 and set(cluster.submits.values()) == {1}
    assert cluster.refused == 0 and 0 < cluster.peak_busy <= cluster.total_gpus == 16
    assert all(job.done for job in cluster.jobs.values())
    assert result.makespan >= result.bound > 0
    # Every GPU-second a cell needs was run.
    need = sum(c.settings["gpus"] * c.settings["sim_seconds"] for c in cells)
    assert cluster.busy_seconds == pytest.approx(need)


def test_lengths_learnt_from_siblings_on_the_virtual_clock() -> None:
    """A sweep of configurations × seeds: every cell once, and the registry recorded each
    duration on the simulated clock (what kappa's estimates read)."""
    print(f"seed {SEED}")
    cells = draw_cells(30, SEED, "siblings")
    assert len({c.settings["config"]["config"] for c in cells}) == 10
    result = simulate(cells, [8, 8], "kappa")
    assert result.counts["succeeded"] == 30
    assert set(result.cluster.submits.values()) == {1} and result.cluster.refused == 0
    assert result.clock_virtual
    assert result.makespan >= result.bound > 0
