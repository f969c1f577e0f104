"""Which accelerators and CPU cores the local executor may hand out."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence

# The thread-pool sizes a CPU job's libraries read: set from the CPUs the job is given.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def detect_gpus(
    explicit: Sequence[int | str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """Device identifiers jobs may be given: ``explicit``, else ``CUDA_VISIBLE_DEVICES``
    (indices or UUIDs; empty means none), else one index per GPU ``nvidia-smi -L`` lists."""
    if explicit is not None:
        return tuple(str(g) for g in explicit)
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return tuple(part.strip() for part in visible.split(",") if part.strip())
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20,
                                 check=True)
    except (OSError, subprocess.SubprocessError):  # no listing: no GPUs known
        return ()
    count = sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
    return tuple(str(i) for i in range(count))


def cpu_threads_per_job(max_parallel: int, cpu_count: int | None = None) -> int:
    """Threads each CPU-only job gets when ``max_parallel`` of them share the cores this
    process may run on (``sched_getaffinity``: a container's CPU limit is respected)."""
    if cpu_count is None:
        try:
            cpu_count = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cpu_count = os.cpu_count() or 1
    return max(1, cpu_count // max(1, min(max_parallel, cpu_count)))
