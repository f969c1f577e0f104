"""The batch script a SLURM job runs, a pure function of its inputs (golden files:
tests/golden/slurm/). On one node the cell's command runs under :mod:`.job_wrapper`; on several
(self-placing: multi-node verl) a Ray head starts on the first node and a worker on each other, then
the command on the head with ``RAY_ADDRESS`` set: a port from the job id, no dashboard, a Ray token
of the job's own (docs/slurm.md)."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path

from orchestrator.executors.base import JobResources

# How long the batch script waits for every Ray node to join before exit 70.
RAY_JOIN_TIMEOUT_S = 300
RAY_JOIN_FAILED_EXIT = 70  # EX_SOFTWARE
# No dashboard: the cell is the Ray driver itself (no Jobs API needed), and a dashboard
# is the heaviest part of a Ray start and holds a fixed port (8265) two jobs would share.
RAY_START_FLAGS = "--include-dashboard=false --disable-usage-stats"
TOKEN_CODE = "import secrets; print(secrets.token_hex(32))"
# The Ray head's port: RAY_PORT_BASE + the SLURM job id modulo RAY_PORT_SPAN.
RAY_PORT_BASE, RAY_PORT_SPAN = 20000, 10000


@dataclass(frozen=True)
class BatchJob:
    """Everything a batch script is made from."""

    argv: tuple[str, ...]
    cwd: Path
    log_path: Path
    job_dir: Path
    resources: JobResources
    python: str
    wrapper: Path
    job_name: str
    time_minutes: int | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch_args: tuple[str, ...] = ()


def time_limit_minutes(hours: float | None, factor: float, extra_minutes: int,
                       default_minutes: int | None) -> int | None:
    """``--time`` in whole minutes (rounded up); ``default_minutes`` if hours are unknown."""
    if hours is None:
        return default_minutes
    return max(1, math.ceil(hours * 60 * factor + extra_minutes))


def _directives(job: BatchJob) -> list[str]:
    res = job.resources
    lines = [f"--job-name={job.job_name}", f"--output={job.log_path}", "--open-mode=append",
             f"--chdir={job.cwd}", f"--nodes={res.nodes}", "--ntasks-per-node=1",
             f"--cpus-per-task={res.cpus}"]
    if res.gpus_per_node > 0:
        lines.append(f"--gpus-per-node={res.gpus_per_node}")
    if job.time_minutes is not None:
        lines.append(f"--time={job.time_minutes}")
    lines += [f"--{option}={getattr(job, option)}"
              for option in ("partition", "account", "qos", "constraint") if getattr(job, option)]
    # SLURM never requeues a cell's job by itself: a preempted or timed-out job ends,
    # and kappa's scheduler retries the cell (counted against its retries), resuming
    # from its checkpoint in the same run folder.
    lines.append("--no-requeue")
    lines.extend(job.sbatch_args)
    return [f"#SBATCH {shlex.quote(_one_line(line))}" for line in lines]


def _one_line(directive: str) -> str:
    """``directive`` if it stays on its ``#SBATCH`` line (the rest of a broken line would
    run in bash); guards what options do not check, such as a run folder's path."""
    if not directive.isprintable():
        raise ValueError(f"a batch script directive may not hold control characters: {directive!r}")
    return directive


def _exec_wrapped(job: BatchJob) -> str:
    """The line that execs the cell's argv under kappa's job wrapper."""
    return (f"exec {shlex.join([job.python, '-I', '-S', str(job.wrapper)])} \"$JOB_DIR\" -- "
            f"{shlex.join(job.argv)}")


def _ray_cluster(job: BatchJob) -> list[str]:
    res = job.resources
    ray = shlex.quote(str(Path(job.python).parent / "ray"))
    gpus = res.gpus_per_node
    # Exit 0 once the cluster at $1 has $2 live nodes.
    probe = ('import ray, sys; ray.init(address=sys.argv[1], logging_level="ERROR"); '
             'sys.exit(sum(n["Alive"] for n in ray.nodes()) < int(sys.argv[2]))')
    return [
        "# Several nodes: a Ray cluster over the allocation (verl's SLURM pattern): the head",
        "# on the first node, a worker on each other one; the cell runs on the head.",
        'mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        'head_node=${nodes[0]}',
        'head_ip=$(srun --nodes=1 --ntasks=1 --overlap -w "$head_node" hostname --ip-address'
        " | awk '{print $1}')",
        "# A port of this job's own: two jobs sharing a node do not meet on Ray's 6379.",
        f"port=$(({RAY_PORT_BASE} + SLURM_JOB_ID % {RAY_PORT_SPAN}))",
        'export RAY_ADDRESS="$head_ip:$port"',
        "# The job's own Ray token (Ray's token auth): its head, workers and the cell share",
        "# it through the environment srun passes on; nobody else on the nodes can connect.",
        "export RAY_AUTH_MODE=token",
        f"RAY_AUTH_TOKEN=$({shlex.join([job.python, '-c', TOKEN_CODE])})",
        "export RAY_AUTH_TOKEN",
        'echo "kappa: Ray head on $head_node ($RAY_ADDRESS), $SLURM_JOB_NUM_NODES nodes"',
        f'srun --nodes=1 --ntasks=1 --overlap -w "$head_node" {ray} start --head '
        f'--node-ip-address="$head_ip" --port="$port" {RAY_START_FLAGS} '
        f'--num-cpus="$SLURM_CPUS_ON_NODE" --num-gpus={gpus} --block &',
        "head_pid=$!",
        'for node in "${nodes[@]:1}"; do',
        f'  srun --nodes=1 --ntasks=1 --overlap -w "$node" {ray} start '
        f'--address="$RAY_ADDRESS" --disable-usage-stats --num-cpus="$SLURM_CPUS_ON_NODE" '
        f"--num-gpus={gpus} --block &",
        "done",
        f"deadline=$((SECONDS + {RAY_JOIN_TIMEOUT_S}))",
        f"until {shlex.join([job.python, '-c', probe])} \"$RAY_ADDRESS\" "
        '"$SLURM_JOB_NUM_NODES" >/dev/null 2>&1; do',
        '  if [ "$SECONDS" -ge "$deadline" ] || ! kill -0 "$head_pid" 2>/dev/null; then',
        '    echo "kappa: the Ray cluster did not reach $SLURM_JOB_NUM_NODES nodes" >&2',
        f"    exit {RAY_JOIN_FAILED_EXIT}",
        "  fi",
        "  sleep 2",
        "done",
        "# The cell is the Ray driver; the Ray daemons (job steps) end with the job.",
        _exec_wrapped(job),
    ]


def _no_gpus(job: BatchJob) -> list[str]:
    if job.resources.gpus > 0:
        return []  # SLURM sets CUDA_VISIBLE_DEVICES to the GPUs it gave the job
    return ["# No GPU asked: none visible. SLURM unsets the variable for such a job, which",
            "# CUDA reads as every GPU of the node (where cgroups do not hide them).",
            "export CUDA_VISIBLE_DEVICES="]


def batch_script(job: BatchJob) -> str:
    """The batch script for ``job`` (see the module docstring)."""
    body = (_ray_cluster(job) if job.resources.nodes > 1 and job.resources.self_placing
            else ["# One node: the cell runs right here, under kappa's job wrapper.",
                  _exec_wrapped(job)])
    lines = [
        "#!/bin/bash",
        "# kappa: one cell as a SLURM batch job (orchestrator/executors/slurm_script.py).",
        *_directives(job),
        "set -u",
        f"JOB_DIR={shlex.quote(str(job.job_dir))}",
        "# The job names itself in its folder: a submitter killed between sbatch and its own",
        "# record leaves the id found here after SLURM has forgotten the job.",
        'echo "$SLURM_JOB_ID" > "$JOB_DIR/slurm_id"',
        "# A previous run of this script (same job, requeued by hand) left its exit code.",
        'rm -f "$JOB_DIR/exit"',
        *_no_gpus(job),
        *body,
    ]
    return "\n".join(lines) + "\n"
