"""What a user may set on the SLURM executor (``-E KEY=VALUE``). Every value becomes an ``#SBATCH``
line of a script bash runs, so none may hold a line break, and ``sbatch_args`` passes on only the
options of :data:`SBATCH_ARGS_ALLOWED`."""

from __future__ import annotations

import shlex
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator

from orchestrator.executors.base import ExecutorOptions
from orchestrator.limits import MAX_PARALLEL

MAX_TIME_MINUTES = 365 * 24 * 60  # the longest --time an option may ask for: a year
# The sbatch options ``sbatch_args`` may give, by their full long name: an allow-list, since sbatch
# (getopt_long) also takes any unambiguous abbreviation (``--arr`` is ``--array``, ``--outp`` is
# ``--output``), so refusing kappa's own options by name leaves every abbreviation of them open.
# Left out on purpose: what kappa sets itself (job name, output, chdir, nodes, tasks, CPUs, GPUs,
# time, partition, account, QOS, constraint, requeue, comment), and what would run the cell other
# than once, elsewhere or not at all (--array, --requeue, --wrap, --export*, --test-only, --wait,
# --clusters, --hold, --uid, --get-user-env, --container, --dependency, --het-*).
SBATCH_ARGS_ALLOWED = frozenset({
    "--mem", "--mem-per-cpu", "--mem-per-gpu", "--exclusive", "--oversubscribe", "--gres",
    "--gres-flags", "--gpu-bind", "--gpu-freq", "--cpu-freq", "--cpus-per-gpu", "--nodelist",
    "--exclude", "--reservation", "--licenses", "--tmp", "--hint", "--signal", "--switches",
    "--mincpus", "--sockets-per-node", "--cores-per-socket", "--threads-per-core", "--core-spec",
    "--thread-spec", "--network", "--nice", "--priority", "--mail-type", "--mail-user", "--wckey",
    "--prefer", "--mem-bind", "--spread-job", "--use-min-nodes", "--distribution", "--acctg-freq",
    "--profile", "--propagate", "--begin", "--deadline", "--delay-boot", "--time-min",
    "--mcs-label", "--power", "--extra", "--tres-per-task", "--ntasks-per-gpu", "--gpus-per-task",
    "--ntasks-per-core", "--ntasks-per-socket", "--kill-on-invalid-dep"})
SBATCH_ARG_MAX_CHARS = 4096


def _one_line(value: str | None) -> str | None:
    """``value``, if it has no line break or other control character."""
    if value is not None and not value.isprintable():
        raise ValueError("may not hold a line break or other control character "
                         f"(found {value[:60]!r})")
    return value


def _split_args(value: Any) -> Any:
    """``"--mem=8G --exclusive"`` (as typed after ``-E sbatch_args=``) or a list."""
    if isinstance(value, str):
        return tuple(shlex.split(value))
    if isinstance(value, list):
        return tuple(value)
    return value


class SlurmOptions(ExecutorOptions):
    """What a user may set on the SLURM executor, bounded to values SLURM takes: a --time
    past a year is refused here (exit 2), not by sbatch at each cell."""

    partition: str | None = Field(None, max_length=256,
                                  description="partition (sbatch --partition)")
    account: str | None = Field(None, max_length=256,
                                description="account to charge (sbatch --account)")
    qos: str | None = Field(None, max_length=256, description="quality of service (sbatch --qos)")
    constraint: str | None = Field(
        None, max_length=1024,
        description="node features required (sbatch --constraint), e.g. a100")
    time_factor: float = Field(
        1.5, ge=1.0, le=100.0, description="--time = the cell's resources.hours times this, "
                                           "plus time_extra_minutes")
    time_extra_minutes: int = Field(10, ge=0, le=MAX_TIME_MINUTES,
                                    description="minutes added to --time (see time_factor)")
    default_time_minutes: int | None = Field(
        None, ge=1, le=MAX_TIME_MINUTES,
        description="--time for cells whose hours are unknown (default: the partition's)")
    max_parallel: int = Field(
        64, ge=1, le=MAX_PARALLEL,
        description="kappa's jobs in SLURM's queue at once (pending or running)")
    sbatch_args: Annotated[tuple[str, ...], BeforeValidator(_split_args)] = Field(
        (), max_length=64, description="further sbatch options in long form, e.g. '--mem=32G "
                                       "--exclusive' (`docs/slurm.md` lists those allowed)")
    cancel_wait: float = Field(
        60.0, ge=0, le=86400.0, description="seconds cancel waits for SLURM to end the job")

    @field_validator("partition", "account", "qos", "constraint")
    @classmethod
    def _on_one_line(cls, value: str | None) -> str | None:
        return _one_line(value)

    @field_validator("sbatch_args")
    @classmethod
    def _allowed_only(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arg in value:
            _one_line(arg)
            if len(arg) > SBATCH_ARG_MAX_CHARS:
                raise ValueError(f"{arg[:40]!r}...: longer than {SBATCH_ARG_MAX_CHARS} characters")
            if not arg.startswith("--"):
                raise ValueError(f"{arg!r}: give sbatch options in their long form, --name=value")
            if (name := arg.split("=", 1)[0]) not in SBATCH_ARGS_ALLOWED:
                raise ValueError(
                    f"{name!r} is not an sbatch option kappa passes on (by its full name; "
                    "kappa sets job name, output, nodes, CPUs, GPUs, time, partition, "
                    "account, QOS, constraint itself, and never runs a cell as an array, "
                    "requeued, elsewhere or held); allowed: "
                    + " ".join(sorted(SBATCH_ARGS_ALLOWED)))
        return value
