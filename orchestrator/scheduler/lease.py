"""One scheduler per sweep, on any machine: a lease in the registry, kept by a heartbeat.

A scheduler takes its sweep's lease (:mod:`orchestrator.registry.leases`), renews it
every third of ``KAPPA_LEASE_SECONDS`` (default 30) on a thread of its own and gives it
back on a clean exit; another scheduler, on any machine sharing the registry, takes over
once it is released or expired (at once from a holder on this host whose process is gone).

Fencing: locally the lease is lost once ``lease_seconds`` have passed since the start of
the last successful renewal (a monotonic clock, which runs on while the process is
paused; the registry counts its expiry from a later moment, so this side gives up first)
or a renewal finds another owner; :meth:`SchedulerLease.check` then raises
:class:`LeaseLost`, before every pass and every launch. In the registry, every cell write
goes through ``Registry.fenced``: it writes nothing once the lease has another owner.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from functools import cache
from types import TracebackType

from orchestrator import configuration
from orchestrator.errors import KappaError
from orchestrator.registry import Registry
from orchestrator.registry.engine import server_away
from orchestrator.registry.leases import Claimant, Lease, LeaseLost

LOG = logging.getLogger(__name__)


class SweepLockedError(KappaError):
    """Another scheduler holds the sweep's lease (``holder``: whose it is)."""

    def __init__(self, message: str, holder: Lease | None = None) -> None:
        super().__init__(message)
        self.holder = holder


@cache
def _default_host_id() -> str:
    """This host's identity for pid checks: boot id and pid namespace (two containers
    on one kernel do not see each other's pids), else the host name."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return socket.gethostname()


def this_host() -> tuple[str, str]:
    """(host name, host id); ``KAPPA_HOST_ID`` overrides the id (tests model two
    machines on one host with it)."""
    return socket.gethostname(), configuration.read("KAPPA_HOST_ID") or _default_host_id()


def holder_alive(lease: Lease) -> bool | None:
    """Whether the lease's holder process lives: ``None`` when it is on another host
    (only its heartbeat can tell)."""
    from orchestrator.runs.liveness import is_running

    return is_running(lease.pid, lease.pid_start) if lease.host_id == this_host()[1] else None


def is_driven(sweep: str, registry: Registry) -> bool:
    """Whether a scheduler (on any machine) holds ``sweep``'s lease now: it has not
    expired, and its holder, if on this host, lives."""
    lease = registry.lease(sweep)
    return lease is not None and not lease.expired and holder_alive(lease) is not False


class SchedulerLease:
    """The lease a scheduler holds on its sweep while it drives it (a context manager)."""

    def __init__(self, registry: Registry, sweep: str, seconds: float | None = None) -> None:
        from orchestrator.runs.liveness import start_ticks

        self.registry = registry
        self.sweep = sweep
        self.seconds = seconds if seconds is not None else configuration.read("KAPPA_LEASE_SECONDS")
        self.me = Claimant(str(uuid.uuid4()), *this_host(), os.getpid(), start_ticks(os.getpid()))
        self._deadline = 0.0
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> None:
        """Take the lease and start the heartbeat, or raise :class:`SweepLockedError`
        saying who drives the sweep."""
        started = time.monotonic()
        taken, lease = self.registry.take_lease(self.sweep, self.me, self.seconds,
                                                lambda held: holder_alive(held) is False)
        if not taken:
            who = lease.describe() if lease is not None else "another scheduler"
            raise SweepLockedError(
                f"sweep '{self.sweep}' is already being driven by a scheduler on {who}; "
                f"`kappa status {self.sweep}` shows its progress", lease)
        self._deadline = started + self.seconds
        self._lost = None
        self._stop.clear()
        self._thread = threading.Thread(target=self._heartbeat, daemon=True,
                                        name=f"kappa-lease-{self.sweep}")
        self._thread.start()

    def held(self) -> bool:
        """Whether this scheduler may still act (locally known; cheap)."""
        if self._lost is None and time.monotonic() >= self._deadline:
            self._lost = (f"its lease was not renewed within {self.seconds:g}s "
                          "(the process was paused, or the registry was unreachable)")
        return self._lost is None

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless the lease is still held."""
        if not self.held():
            raise self.lost_error()

    def lost_error(self) -> LeaseLost:
        """The error a scheduler that lost its lease stops with, saying why."""
        return LeaseLost(f"the scheduler of sweep '{self.sweep}' stopped: {self._lost}; "
                         f"another scheduler may drive it now (`kappa status {self.sweep}`)")

    def wait_for(self, probe: Callable[[], object], away: Exception) -> None:
        """The registry is away (``away``: what it said): wait, while the lease lasts, until
        ``probe()`` reads it again (the heartbeat then renews the lease); :class:`LeaseLost`
        once the lease has run out, as another scheduler may then drive the sweep."""
        LOG.warning("the registry is away (%s): waiting for it while the lease lasts (%gs)",
                    (str(away).strip().splitlines() or [""])[0][:200], self.seconds)
        pause = 0.05
        while True:
            self.check()
            time.sleep(pause)
            pause = min(2 * pause, 2.0)
            try:
                probe()
            except Exception as exc:
                if not server_away(exc):
                    raise
                continue
            LOG.info("the registry answers again: carrying on")
            return

    def _heartbeat(self) -> None:
        interval = self.seconds / 3
        while not self._stop.wait(interval):
            if not self.held():
                return
            started = time.monotonic()
            try:
                renewed = self.registry.renew_lease(self.sweep, self.me.owner, self.seconds)
            except Exception as exc:  # the registry is away: retry; the deadline fences
                LOG.warning("could not renew the lease of %s: %s", self.sweep, exc)
                continue
            if not renewed:
                self._lost = f"another scheduler took its lease{self._holder_text()}"
                return
            self._deadline = max(self._deadline, started + self.seconds)

    def _holder_text(self) -> str:
        try:
            lease = self.registry.lease(self.sweep)
        except Exception:
            return ""
        return f" ({lease.describe()})" if lease is not None else ""

    def release(self) -> None:
        """Stop the heartbeat and give the lease back if it is still ours."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._lost is None:
            try:
                self.registry.release_lease(self.sweep, self.me.owner)
            except Exception as exc:  # it expires on its own
                LOG.warning("could not release the lease of %s: %s", self.sweep, exc)
        self._lost = self._lost or "released"

    def __enter__(self) -> SchedulerLease:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
