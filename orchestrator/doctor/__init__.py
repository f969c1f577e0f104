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

import math
import threading
import time
from collections.abc import Callable, Iterable
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
        """The result as plain JSON values (strict JSON: no NaN), any password masked.

        Details come from probes (a worker's environment, an error's text), so they are
        masked and made JSON-safe here, once, rather than trusted to each check.
        """
        return {"name": self.name, "status": self.status.value, "summary": redact(self.summary),
                "fix": None if self.fix is None else redact(self.fix),
                "details": json_safe(self.details)}


def json_safe(value: Any) -> Any:
    """``value`` as strict JSON values: strings masked, non-finite floats as strings."""
    if isinstance(value, dict):
        return {redact(str(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    if isinstance(value, bool | int) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return redact(str(value))


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
    # A probe process (``import verl``) or Ray probe job may take this long; one HTTP or
    # database request gets network_timeout_s. No check outlives CHECK_GRACE_S past it.
    timeout_s: float = 180.0

    @property
    def network_timeout_s(self) -> float:
        """How long one request to a server may take: NETWORK_TIMEOUT_S, or less."""
        return max(0.1, min(NETWORK_TIMEOUT_S, self.timeout_s))

    def __post_init__(self) -> None:
        problems = [Problem(option, "must be a finite number >= 0", found=repr(value))
                    for option, value in (("--min-free-gib", self.min_free_gib),
                                          ("--timeout", self.timeout_s))
                    if not (math.isfinite(value) and value >= 0)]
        if problems:
            raise UserInputError("invalid kappa doctor option", problems)


NETWORK_TIMEOUT_S = 10.0  # one request to a server: MLflow, a registry, Ray's dashboard
CHECK_GRACE_S = 30.0  # past options.timeout_s, a check still running is abandoned


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

    results: dict[str, CheckResult] = {}

    def run(name: str) -> None:
        try:
            results[name] = checks[name](options)
        except BaseException as exc:
            # A probe's failure (even a library's sys.exit) is a finding, not a crash.
            results[name] = CheckResult(
                name, Status.PROBLEM, f"the check failed: {exc!r}"[:500],
                fix="a bug in kappa doctor: please report it with this message")

    # Daemon threads, not a pool: a check stuck in a library call that has no timeout
    # (a server that accepts and never answers) is abandoned at the deadline, and the
    # process can still exit; a pool would join it at exit.
    threads = {n: threading.Thread(target=run, args=(n,), name=f"doctor-{n}", daemon=True)
               for n in names}
    for thread in threads.values():
        thread.start()
    limit = options.timeout_s + CHECK_GRACE_S
    deadline = time.monotonic() + limit
    for thread in threads.values():
        thread.join(max(0.0, deadline - time.monotonic()))
    return [results.get(n) or CheckResult(
        n, Status.PROBLEM, f"no answer within {limit:g} s: the check was abandoned",
        fix="a server it asks accepts connections but does not answer: check the "
            "address, or raise --timeout") for n in names]


def exit_code(results: Iterable[CheckResult]) -> int:
    """0 when nothing is a problem (warnings allowed), else 2."""
    return 2 if any(r.status is Status.PROBLEM for r in results) else 0
