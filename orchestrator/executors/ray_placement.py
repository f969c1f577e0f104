"""Where a Ray job runs (docs/ray.md): Ray runs an entrypoint on the head node unless it asks for
entrypoint resources, which any node having them then provides. So a cell that *is* its workload
(embedded) reserves its CPUs, GPUs and custom resources, and a sweep spreads over the workers; a
self-placing (verl) cell reserves nothing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.executors.base import JobResources


@dataclass(frozen=True)
class RayNode:
    """One alive node of a Ray cluster and its total resources (``CPU``, ``GPU``, custom)."""

    node_id: str
    resources: Mapping[str, float] = field(default_factory=dict)
    is_head: bool = False

    @property
    def cpus(self) -> float:
        """CPUs Ray schedules here."""
        return float(self.resources.get("CPU", 0.0))

    @property
    def gpus(self) -> float:
        """GPUs Ray schedules here."""
        return float(self.resources.get("GPU", 0.0))

    def has(self, need: Mapping[str, float]) -> bool:
        """Whether this node alone has every resource of ``need``."""
        return all(float(self.resources.get(k, 0.0)) >= v for k, v in need.items() if v > 0)


def entrypoint_need(resources: JobResources,
                    custom: Mapping[str, float] | None = None) -> dict[str, float]:
    """What a job's entrypoint reserves on its node, in Ray's names (none if self-placing)."""
    if resources.self_placing:
        return {}
    need = {"CPU": float(resources.cpus), **{k: float(v) for k, v in (custom or {}).items()}}
    if resources.gpus > 0:
        need["GPU"] = float(resources.gpus)
    return need


def entrypoint_options(resources: JobResources,
                       custom: Mapping[str, float] | None = None) -> dict[str, Any]:
    """``submit_job`` keywords reserving the entrypoint's resources."""
    need = entrypoint_need(resources, custom)
    options: dict[str, Any] = {option: need.pop(key) for key, option in (
        ("CPU", "entrypoint_num_cpus"), ("GPU", "entrypoint_num_gpus")) if key in need}
    if need:
        options["entrypoint_resources"] = need
    return options


def _fmt(resources: Mapping[str, float]) -> str:
    names = {"CPU": "CPU(s)", "GPU": "GPU(s)"}
    return ", ".join(f"{v:g} {names.get(k, k)}" for k, v in sorted(
        resources.items(), key=lambda kv: (kv[0] not in names, kv[0])))


def why_not(resources: JobResources, nodes: Iterable[RayNode],
            custom: Mapping[str, float] | None = None) -> str | None:
    """Why a job asking for ``resources`` could never run on ``nodes`` (or ``None``)."""
    nodes = list(nodes)
    if not nodes:
        return None
    if resources.self_placing:
        per_node = resources.gpus_per_node
        enough = [n for n in nodes if n.gpus >= per_node]
        if len(enough) >= resources.nodes:
            return None
        return (f"needs {resources.nodes} node(s) × {per_node} GPU(s) (verl: trainer.nnodes × "
                f"n_gpus_per_node); the Ray cluster has {len(enough)} node(s) with "
                f"{per_node} or more GPUs (the most on one node: {max(n.gpus for n in nodes):g}; "
                f"{sum(n.gpus for n in nodes):g} GPU(s) on {len(nodes)} node(s) in all)")
    if resources.nodes > 1:
        return (f"needs {resources.nodes} nodes, but its entrypoint is its workload and Ray "
                "runs an entrypoint on one node")
    need = entrypoint_need(resources, custom)
    if any(node.has(need) for node in nodes):
        return None
    largest = max(nodes, key=lambda n: (n.gpus, n.cpus, len(n.resources)))
    shown = {k: float(largest.resources.get(k, 0.0)) for k in ("CPU", "GPU", *need)}
    return (f"needs one node with {_fmt(need)} (resources.cpus: {resources.cpus}, GPUs: "
            f"{resources.gpus}); the largest Ray node has {_fmt(shown)}")


def alive_nodes(address: str, timeout_s: int = 30) -> list[RayNode]:
    """The alive nodes of the cluster whose dashboard is at ``address`` (State API)."""
    from ray.util.state import list_nodes

    from orchestrator.executors.ray_client import dashboard_url, exactly_this_address

    with exactly_this_address():
        states = list_nodes(address=dashboard_url(address), filters=[("state", "=", "ALIVE")],
                            timeout=timeout_s, raise_on_missing_output=False)
    return [RayNode(str(s.node_id), {str(k): float(v) for k, v in
                                     (s.resources_total or {}).items()}, bool(s.is_head_node))
            for s in states]


def free_slots(gpus: int, nodes: Iterable[RayNode], held: Iterable[Mapping[str, str]]) -> int:
    """How many more jobs needing ``gpus`` GPUs (and a CPU) fit beside what kappa's active
    jobs hold (their metadata). Others' work is unseen: it shows as kappa's PENDING jobs."""
    nodes = list(nodes)
    held = list(held)
    room = int(sum(n.cpus for n in nodes) - sum(_number(m, "cpus") for m in held))
    if gpus > 0:
        free_gpus = sum(n.gpus for n in nodes) - sum(_number(m, "gpus") for m in held)
        room = min(room, int(free_gpus // gpus))
    return max(0, room)


def _number(metadata: Mapping[str, str], key: str) -> float:
    try:
        return float(metadata.get(key, 0))
    except ValueError:
        return 0.0
