"""The knobs of the scheduler loop, and the backoff before a retry."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from orchestrator.registry import Registry


def env_seconds(name: str, default: float) -> float:
    """A duration from the environment (how tests and impatient users shorten waits)."""
    try:
        return float(os.environ[name])
    except (KeyError, ValueError):
        return default


def retry_delay(failures: int, base: float, cap: float = 300.0) -> float:
    """Seconds to wait before retry number ``failures`` (1, 2, ...): ``base * 2**(n-1)``."""
    return min(cap, base * 2 ** max(0, failures - 1))


@dataclass
class SchedulerOptions:
    """Knobs of the loop. Defaults suit real sweeps; ``KAPPA_POLL_INTERVAL`` and
    ``KAPPA_RETRY_BACKOFF`` (seconds) change them, e.g. for tests."""

    max_parallel: int | None = None
    poll_interval: float = field(default_factory=lambda: env_seconds("KAPPA_POLL_INTERVAL", 0.5))
    retry_backoff: float = field(default_factory=lambda: env_seconds("KAPPA_RETRY_BACKOFF", 5.0))
    on_tick: Callable[[Registry, str], None] | None = None
