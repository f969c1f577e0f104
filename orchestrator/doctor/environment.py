"""Doctor checks of this machine: Python, package versions, GPUs, free disk."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
from pathlib import Path

from orchestrator import paths
from orchestrator.doctor import CheckResult, DoctorOptions, Status

MIN_PYTHON = (3, 11)
SUPPORTED_VERL = "0.9.1"  # kappa_verl.SUPPORTED_VERL, read here without importing verl
# Distribution names, as ``pip`` knows them.
PACKAGES = ("kappa-orchestrator", "kappa-verl", "verl", "vllm", "sglang", "torch", "ray",
            "mlflow", "mlflow-skinny")
GIB = 1024**3


def check_python(options: DoctorOptions) -> CheckResult:
    """The interpreter kappa runs in is new enough."""
    version = ".".join(map(str, sys.version_info[:3]))
    details = {"version": version, "executable": sys.executable}
    if sys.version_info[:2] < MIN_PYTHON:
        return CheckResult("python", Status.PROBLEM, f"Python {version} is too old",
                           fix="use Python >= 3.11", details=details)
    return CheckResult("python", Status.OK, f"Python {version} ({sys.executable})", details=details)


def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (``None``: not installed)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_packages(options: DoctorOptions) -> CheckResult:
    """Versions of verl, its rollout engines, torch (and CUDA), Ray and MLflow, and kappa's
    shipped base models intact. Missing verl or rollout engines is a warning (the embedded
    backend needs neither; they belong on GPU nodes); a verl other than the plug-in's, or a
    shipped base model that fails its checksum, is a problem."""
    from orchestrator.backends.embedded.shipped import damaged_files

    versions = {name: installed_version(name) for name in PACKAGES}
    skinny = versions.pop("mlflow-skinny")  # MLflow's client-only distribution counts too
    versions["mlflow"] = versions["mlflow"] or skinny
    if versions["torch"] is not None:
        import torch

        versions["torch_cuda"] = torch.version.cuda
    shown = ", ".join(f"{k} {v}" for k, v in versions.items() if v is not None)
    problems: list[str] = []
    warnings: list[str] = []
    fixes: list[str] = []
    for core in ("torch", "mlflow"):
        if versions[core] is None:
            problems.append(f"{core} is not installed")
            fixes.append("`pip install -e .` in the kappa checkout")
    for damaged in damaged_files():
        problems.append(damaged.message)
        fixes.append(damaged.fix or "")
    verl = versions["verl"]
    if verl is None:
        warnings.append("verl is not installed (only the embedded backend can run here)")
        fixes.append(f"for verl cells: `pip install verl=={SUPPORTED_VERL}` and the plug-in "
                     "(plugins/README.md)")
    elif verl != SUPPORTED_VERL:
        problems.append(f"verl {verl} is not the version kappa's plug-in supports "
                        f"({SUPPORTED_VERL})")
        fixes.append(f"`pip install verl=={SUPPORTED_VERL}`")
    if verl is not None and versions["vllm"] is None and versions["sglang"] is None:
        warnings.append("neither vLLM nor SGLang is installed: verl cannot roll out here "
                        "(needed on the GPU nodes that run verl cells)")
        fixes.append(f"on GPU nodes: `pip install 'verl[vllm]=={SUPPORTED_VERL}'`")
    if versions["ray"] is None:
        (problems if options.ray_address else warnings).append(
            "Ray is not installed (needed for --executor ray_jobs and by verl)")
        fixes.append("`pip install -e '.[ray]'`")
    status = Status.PROBLEM if problems else Status.WARNING if warnings else Status.OK
    summary = "; ".join(problems + warnings + [shown])
    return CheckResult("packages", status, summary, fix="; ".join(fixes) or None, details=versions)


def check_gpus(options: DoctorOptions) -> CheckResult:
    """GPUs torch can use. None is a warning: the embedded backend trains on CPU."""
    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    details: dict[str, object] = {"cuda_visible_devices": visible, "torch_cuda": torch.version.cuda}
    if not torch.cuda.is_available():
        why = ("the CPU build of torch" if torch.version.cuda is None
               else "no CUDA device or driver")
        if visible is not None and visible.strip() in ("", "-1"):
            why = f"CUDA_VISIBLE_DEVICES={visible!r}"
        details["count"] = 0
        return CheckResult(
            "gpus", Status.WARNING,
            f"no GPU visible to torch ({why}): fine for the embedded backend, which trains "
            "on CPU; verl cells need CUDA GPUs on the machines that run them",
            fix="for verl cells here: a CUDA build of torch and a visible GPU "
                "(check nvidia-smi and CUDA_VISIBLE_DEVICES)", details=details)
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    details.update(count=len(names), names=names)
    return CheckResult("gpus", Status.OK, f"{len(names)} GPU(s) visible to torch: "
                       + ", ".join(sorted(set(names))), details=details)


def nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (nothing is created to look)."""
    path = path.resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(options: DoctorOptions) -> CheckResult:
    """Free space and write access where run folders and checkpoints go."""
    target = (options.checkpoint_dir or paths.runs_root()).expanduser()
    fix_place = "set KAPPA_HOME (or --checkpoint-dir) to a writable folder"
    try:
        existing = nearest_existing(target)
        usage = shutil.disk_usage(existing)
    except (OSError, RuntimeError) as exc:  # unreadable parent, symlink loop
        return CheckResult("disk", Status.PROBLEM, f"cannot look at {target}: {exc}",
                           fix=fix_place, details={"path": str(target)})
    if not existing.is_dir():
        return CheckResult("disk", Status.PROBLEM, f"{existing} is a file, not a folder: "
                           f"run folders cannot be made at {target}", fix=fix_place,
                           details={"path": str(target), "file": str(existing)})
    free_gib = usage.free / GIB
    details = {"path": str(target), "measured_at": str(existing), "free_gib": round(free_gib, 1),
               "min_free_gib": options.min_free_gib}
    where = str(target) if existing == target.resolve() else f"{target} (not created yet)"
    summary = f"{free_gib:.1f} GiB free for checkpoints at {where}"
    if not os.access(existing, os.W_OK | os.X_OK):
        return CheckResult("disk", Status.PROBLEM, f"{existing} is not writable: {summary}",
                           fix=fix_place, details=details)
    if free_gib < 1.0:
        return CheckResult("disk", Status.PROBLEM, summary, details=details,
                           fix="free space, or point KAPPA_HOME at a larger disk")
    if free_gib < options.min_free_gib:
        return CheckResult(
            "disk", Status.WARNING, f"{summary}: less than {options.min_free_gib:g} GiB "
            "(one verl checkpoint of a 7B model with optimizer state is about 100 GiB)",
            fix="free space, point KAPPA_HOME at a larger disk, or keep fewer checkpoints "
                "(trainer.max_actor_ckpt_to_keep)", details=details)
    return CheckResult("disk", Status.OK, summary, details=details)
