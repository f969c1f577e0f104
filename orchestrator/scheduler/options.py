"""The knobs of the scheduler loop, and the backoff before a retry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from orchestrator import configuration
from orchestrator.registry import Registry


def retry_delay(failures: int, base: float, cap: float = 300.0) -> float:
    """Seconds to wait before retry number ``failures`` (1, 2, ...): ``base * 2**(n-1)``."""
    return min(cap, base * 2 ** max(0, failures - 1))


@dataclass
class SchedulerOptions:
    """Knobs of the loop. Defaults suit real sweeps; ``KAPPA_POLL_INTERVAL`` and
    ``KAPPA_RETRY_BACKOFF`` (seconds) change them, e.g. for tests."""

    max_parallel: int | None = None
    poll_interval: float = field(default_factory=lambda: configuration.read("KAPPA_POLL_INTERVAL"))
    retry_backoff: float = field(default_factory=lambda: configuration.read("KAPPA_RETRY_BACKOFF"))
    on_tick: Callable[[Registry, str], None] | None = None
