"""``kappa doctor``: is this machine (or cluster) ready to run sweeps?

Each check looks at one thing a sweep needs and says ``ok``, ``warning`` (works, with a
limit worth knowing), ``problem`` (a sweep would fail; the result says the fix) or
``skipped`` (not applicable here, and why). The checks live in
:mod:`.environment` (Python, packages, GPUs, disk), :mod:`.stores` (MLflow, the
registry) and :mod:`.plugin` (the verl plug-in here and in Ray workers). They only look:
none creates a registry or an MLflow store that does not exist yet, and the MLflow
write probe deletes the run it made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from orchestrator.errors import Problem, UserInputError
from orchestrator.redact import redact


class Status(StrEnum):
    """A check's verdict; only ``problem`` makes ``kappa doctor`` exit 2."""

    OK = "ok"
    WARNING = "warning"
    PROBLEM = "problem"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    """What one check found: its verdict, a one-line summary, the fix (for a warning or
    a problem) and facts for ``--json``."""

    name: str
    status: Status
    summary: str
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The result as plain JSON values, any password masked."""
        return {"name": self.name, "status": self.status.value, "summary": redact(self.summary),
                "fix": None if self.fix is None else redact(self.fix), "details": self.details}


@dataclass(frozen=True)
class DoctorOptions:
    """Where to look: the stores and cluster the user's sweeps will use."""

    registry: str | None = None
    mlflow: str | None = None
    ray_address: str | None = None
    checkpoint_dir: Path | None = None
    # verl's interpreter (VerlSettings.python); default: this one here, python3 on Ray.
    python: str | None = None
    min_free_gib: float = 50.0
    timeout_s: float = 180.0


Check = Callable[[DoctorOptions], CheckResult]


def all_checks() -> dict[str, Check]:
    """Every check by name, in the order they are shown."""
    from orchestrator.doctor import environment, plugin, stores

    return {"python": environment.check_python, "packages": environment.check_packages,
            "gpus": environment.check_gpus, "plugin": plugin.check_plugin,
            "ray": plugin.check_ray, "mlflow": stores.check_mlflow,
            "registry": stores.check_registry, "disk": environment.check_disk}


def run_checks(options: DoctorOptions, only: Iterable[str] = ()) -> list[CheckResult]:
    """Run the checks named in ``only`` (all by default) concurrently; results in order.

    A check that raises becomes a ``problem`` of its own, so one broken probe never
    hides what the others found.
    """
    checks = all_checks()
    names = list(dict.fromkeys(only)) or list(checks)
    unknown = [n for n in names if n not in checks]
    if unknown:
        raise UserInputError("unknown doctor check", [Problem(
            "--check", f"no check named {n!r}", found=n, allowed=", ".join(checks))
            for n in unknown])

    def run(name: str) -> CheckResult:
        try:
            return checks[name](options)
        except Exception as exc:  # a probe's own failure is a finding, not a crash
            return CheckResult(name, Status.PROBLEM, f"the check failed: {exc!r}"[:500],
                               fix="a bug in kappa doctor: please report it with this message")

    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return list(pool.map(run, names))


def exit_code(results: Iterable[CheckResult]) -> int:
    """0 when nothing is a problem (warnings allowed), else 2."""
    return 2 if any(r.status is Status.PROBLEM for r in results) else 0
