"""``kappa doctor``: is this machine (or cluster) ready to run sweeps? Each check of
:mod:`.environment`, :mod:`.stores` and :mod:`.plugin` (run by :mod:`.run`) is ``ok``, ``warning``
(works, with a limit), ``problem`` (a sweep would fail; with the fix) or ``skipped``. They only
look: none creates a store; the MLflow probe deletes its run."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from orchestrator.errors import UserInputError
from orchestrator.limits import MAX_WAIT_S, number_problem
from orchestrator.redact import redact


class Status(StrEnum):
    """A check's verdict; only ``problem`` makes ``kappa doctor`` exit 2."""

    OK = "ok"
    WARNING = "warning"
    PROBLEM = "problem"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    """What one check found: verdict, one-line summary, fix, and facts for ``--json``."""

    name: str
    status: Status
    summary: str
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The result as strict JSON, passwords masked (probes' details may hold some)."""
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
    # Import verl in the plug-in probes, as a run does (about 10 s), instead of reading
    # what the import would act on (orchestrator.doctor.plugin).
    deep: bool = False

    @property
    def network_timeout_s(self) -> float:
        """How long one request to a server may take: NETWORK_TIMEOUT_S, or less."""
        return max(0.1, min(NETWORK_TIMEOUT_S, self.timeout_s))

    def __post_init__(self) -> None:
        # A timeout of 0 fails every probe; one past a C time_t overflows the waits.
        found = (number_problem(self.min_free_gib, "--min-free-gib", 0,
                                fix="give GiB, e.g. --min-free-gib 50 (the default)"),
                 number_problem(self.timeout_s, "--timeout", 0, MAX_WAIT_S, low_open=True,
                                fix="give seconds, e.g. --timeout 180 (the default)"))
        if problems := [problem for problem in found if problem is not None]:
            raise UserInputError("invalid kappa doctor option", problems)


NETWORK_TIMEOUT_S = 10.0  # one request to a server: MLflow, a registry, Ray's dashboard
