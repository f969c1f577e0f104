"""Ray placement without a cluster: what an entrypoint reserves, and which requests a
cluster's nodes could never hold (:mod:`orchestrator.executors.ray_placement`).

The slow tests/integration/test_ray_placement.py runs the same logic on a real local
multi-node Ray cluster.
"""

from __future__ import annotations

import inspect

import pytest

from orchestrator.executors.base import JobResources
from orchestrator.executors.ray_placement import (
    RayNode,
    entrypoint_options,
    free_slots,
    why_not,
)

HEAD = RayNode("head", {"memory": 1e9}, is_head=True)  # no CPUs: drivers only
NODE_A = RayNode("a", {"CPU": 2.0, "node_a": 1.0})
NODE_B = RayNode("b", {"CPU": 4.0, "node_b": 1.0})
GPU_NODE = RayNode("g", {"CPU": 16.0, "GPU": 4.0})
EMBEDDED = JobResources(gpus=0, cpus=1)
VERL_2X8 = JobResources(gpus=16, nodes=2, cpus=1, self_placing=True)


def test_embedded_cells_reserve_their_resources_verl_drivers_none() -> None:
    """The keywords are those of the real JobSubmissionClient.submit_job."""
    ray_jobs = pytest.importorskip("ray.job_submission")
    accepted = inspect.signature(ray_jobs.JobSubmissionClient.submit_job).parameters
    cases = [
        (EMBEDDED, None, {"entrypoint_num_cpus": 1.0}),
        (JobResources(gpus=1, cpus=3), {"node_b": 0.01},
         {"entrypoint_num_cpus": 3.0, "entrypoint_num_gpus": 1.0,
          "entrypoint_resources": {"node_b": 0.01}}),
        (VERL_2X8, {"node_b": 0.01}, {}),  # a resource-free driver: on the head node
    ]
    for resources, custom, expected in cases:
        options = entrypoint_options(resources, custom)
        assert options == expected
        assert set(options) <= set(accepted)


def test_what_no_node_could_hold_is_named() -> None:
    nodes = [HEAD, NODE_A, NODE_B]
    assert why_not(EMBEDDED, nodes) is None
    assert why_not(JobResources(cpus=4), nodes) is None  # node b has 4
    too_many_cpus = why_not(JobResources(cpus=8), nodes)
    assert too_many_cpus is not None
    assert "needs one node with 8 CPU(s) (resources.cpus: 8, GPUs: 0)" in too_many_cpus
    assert "the largest Ray node has 4 CPU(s), 0 GPU(s)" in too_many_cpus
    gpu = why_not(JobResources(gpus=1), nodes)
    assert gpu is not None and "1 GPU(s)" in gpu
    assert why_not(EMBEDDED, nodes, {"node_b": 0.01}) is None
    assert why_not(JobResources(cpus=3), nodes, {"node_a": 0.01}) is not None  # a has 2
    missing = why_not(EMBEDDED, nodes, {"node_c": 0.01})
    assert missing is not None and "0 node_c" in missing
    assert why_not(JobResources(nodes=2), nodes) is not None  # an entrypoint is on one node


def test_verl_cells_need_nnodes_nodes_with_their_gpus() -> None:
    assert why_not(VERL_2X8, [HEAD, GPU_NODE, GPU_NODE, GPU_NODE, GPU_NODE]) is not None
    big = RayNode("big", {"CPU": 64.0, "GPU": 8.0})
    assert why_not(VERL_2X8, [HEAD, big, big]) is None
    one = why_not(VERL_2X8, [HEAD, big, GPU_NODE])
    assert one is not None
    assert "needs 2 node(s) × 8 GPU(s) (verl: trainer.nnodes × n_gpus_per_node)" in one
    assert "has 1 node(s) with 8 or more GPUs (the most on one node: 8" in one
    sixty_four = why_not(JobResources(gpus=64, nodes=8, self_placing=True), [HEAD, NODE_A])
    assert sixty_four is not None and "0 GPU(s) on 2 node(s) in all" in sixty_four


def test_unknown_nodes_refuse_nothing() -> None:
    assert why_not(JobResources(gpus=64, nodes=8, self_placing=True), []) is None


def test_free_slots_count_what_kappas_jobs_hold() -> None:
    nodes = [HEAD, NODE_A, NODE_B, GPU_NODE]  # 22 CPUs, 4 GPUs
    assert free_slots(0, nodes, []) == 22
    held = [{"cpus": "2", "gpus": "1"}, {"cpus": "16", "gpus": "2"}, {"other": "x"}]
    assert free_slots(0, nodes, held) == 4
    assert free_slots(1, nodes, held) == 1
    assert free_slots(2, nodes, held) == 0
    assert free_slots(0, nodes, [{"cpus": "30"}]) == 0
