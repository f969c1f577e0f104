"""Who drives a sweep: a scheduler's lease in the registry (table ``sweep_leases``), a row naming
its owner (a uuid per scheduler), host and pid, renewed by a heartbeat until ``expires_at``. Each
rule is one transaction: ``take_lease`` locks the row and takes it if it is free, ours, expired, or
held by a process the caller proves dead (``holder_dead``); only the owner renews or releases it
(``UPDATE ... WHERE owner = me``); every write of a fenced registry (``Registry.fenced``) first
locks the row and checks its owner, so a scheduler that lost its lease changes nothing (the takeover
waits for that lock, and the new owner sees every write the old one made). Times are the registry's
clock (PostgreSQL's ``now()``), so machines whose clocks disagree still agree on expiry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from orchestrator import configuration
from orchestrator.errors import KappaError
from orchestrator.registry.connection import (
    RegistryConnection,
    insert_missing,
    sweep_row,
    updated_one,
)
from orchestrator.registry.models import LeaseRow, SweepRow, utcnow


class LeaseLost(KappaError):
    """A scheduler's lease on its sweep was taken over (or ran out): it must stop."""


@dataclass(frozen=True)
class Claimant:
    """A scheduler asking for a lease: its owner id, host (name, and an id that tells
    whether a pid can be checked from here), pid and the pid's start time."""

    owner: str
    host: str
    host_id: str
    pid: int
    pid_start: int | None = None


@dataclass(frozen=True)
class Lease:
    """A sweep's lease as read at the registry's time ``now``."""

    sweep: str
    owner: str
    host: str
    host_id: str
    pid: int
    pid_start: int | None
    lease_seconds: float
    acquired_at: datetime
    heartbeat_at: datetime
    expires_at: datetime
    now: datetime

    @property
    def expired(self) -> bool:
        """Whether its owner failed to renew it in time (anyone may take it)."""
        return self.expires_at <= self.now

    @property
    def heartbeat_age(self) -> float:
        """Seconds since the owner last renewed it."""
        return max(0.0, (self.now - self.heartbeat_at).total_seconds())

    def describe(self) -> str:
        """``host h1 pid 42 since 2026-12-01 12:00:00 UTC (heartbeat 3s ago)``."""
        state = (f"expired {(self.now - self.expires_at).total_seconds():.0f}s ago"
                 if self.expired else f"heartbeat {self.heartbeat_age:.0f}s ago")
        return (f"host {self.host} pid {self.pid} since "
                f"{self.acquired_at:%Y-%m-%d %H:%M:%S} UTC ({state})")

    def as_json(self) -> dict[str, Any]:
        """For ``kappa status --json``."""
        return {"owner": self.owner, "host": self.host, "pid": self.pid,
                "since": self.acquired_at.isoformat(),
                "heartbeat_at": self.heartbeat_at.isoformat(),
                "heartbeat_age_s": round(self.heartbeat_age, 1),
                "expires_at": self.expires_at.isoformat(), "expired": self.expired}

    @classmethod
    def of(cls, sweep: str, row: LeaseRow | Mapping[str, Any], now: datetime) -> Lease | None:
        """The lease a row (or its values by column name) holds at ``now``; ``None``: free."""
        get: Callable[[str], Any] = (row.__getitem__ if isinstance(row, Mapping)
                                     else partial(getattr, row))
        if get("owner") is None or get("expires_at") is None:
            return None
        return cls(sweep, get("owner"), get("host") or "?", get("host_id") or "",
                   get("pid") or 0, get("pid_start"), get("lease_seconds") or 0.0,
                   get("acquired_at") or now, get("heartbeat_at") or now, get("expires_at"), now)


#: The lease row's columns a :class:`Lease` is read from.
LEASE_COLUMNS = tuple(f.name for f in fields(Lease) if f.name not in ("sweep", "now"))


def registry_now(session: Session) -> datetime:
    """The registry's clock: the server's on PostgreSQL, this machine's on SQLite."""
    if session.get_bind().dialect.name == "postgresql":
        value = session.scalar(select(func.now()))
        if isinstance(value, datetime):
            return value
    return utcnow()


def _locked_row(session: Session, sweep_id: int, *, shared: bool = False) -> LeaseRow | None:
    if session.get_bind().dialect.name == "postgresql":
        # A process frozen (SIGSTOP, a suspended VM) inside this transaction would hold
        # the lease row, and so keep its lease from being taken over, forever: the
        # server ends the transaction once it idles as long as a lease. Only here: a
        # long read elsewhere may idle longer on a busy client, and holds no lease.
        session.execute(select(func.set_config(
            "idle_in_transaction_session_timeout",
            str(max(1000, int(configuration.read("KAPPA_LEASE_SECONDS") * 1000))), True)))
    query = select(LeaseRow).where(LeaseRow.sweep_id == sweep_id)
    # SQLite ignores FOR UPDATE: its transactions (BEGIN IMMEDIATE) are exclusive anyway.
    return session.scalar(query.with_for_update(read=shared))


def _update_owned(session: Session, sweep: str, holder: str, /, **values: Any) -> bool:
    """Set ``values`` on ``sweep``'s lease row iff ``holder`` owns it; whether it did."""
    sweep_id = select(SweepRow.id).where(SweepRow.name == sweep).scalar_subquery()
    return updated_one(session, update(LeaseRow).values(**values).where(
        LeaseRow.sweep_id == sweep_id, LeaseRow.owner == holder))


class LeaseStore(RegistryConnection):
    """The registry's lease methods."""

    def take_lease(self, sweep: str, me: Claimant, seconds: float,
                   holder_dead: Callable[[Lease], bool] | None = None) -> tuple[bool, Lease | None]:
        """Take ``sweep``'s lease for ``seconds`` (see the rules above): (taken?, the lease)."""
        with self._tx() as session:
            sweep_id = sweep_row(session, sweep).id
            insert_missing(session, LeaseRow, "sweep_id", sweep_id=sweep_id)  # free
            row = _locked_row(session, sweep_id)
            assert row is not None
            now = registry_now(session)
            current = Lease.of(sweep, row, now)
            if current is not None and current.owner != me.owner and not current.expired \
                    and not (holder_dead is not None and holder_dead(current)):
                return False, current
            row.owner, row.host, row.host_id, row.pid, row.pid_start = (
                me.owner, me.host, me.host_id, me.pid, me.pid_start)
            row.lease_seconds = seconds
            if current is None or current.owner != me.owner:
                row.acquired_at = now
            row.heartbeat_at = now
            row.expires_at = now + timedelta(seconds=seconds)
            session.flush()
            return True, Lease.of(sweep, row, now)

    def renew_lease(self, sweep: str, owner: str, seconds: float) -> bool:
        """Extend ``owner``'s lease by ``seconds`` from now; ``False``: it is not theirs."""
        with self._tx() as session:
            now = registry_now(session)
            return _update_owned(session, sweep, owner, heartbeat_at=now, lease_seconds=seconds,
                                 expires_at=now + timedelta(seconds=seconds))

    def release_lease(self, sweep: str, owner: str) -> bool:
        """Give up ``owner``'s lease (nothing if it is no longer theirs)."""
        with self._tx() as session:
            return _update_owned(session, sweep, owner, owner=None,
                                 expires_at=registry_now(session))

    def lease(self, sweep: str) -> Lease | None:
        """Who drives ``sweep`` (the lease may have expired), or ``None``."""
        with self._tx() as session:
            row = session.scalar(select(LeaseRow).join(SweepRow, SweepRow.id == LeaseRow.sweep_id)
                                 .where(SweepRow.name == sweep))
            return None if row is None else Lease.of(sweep, row, registry_now(session))


def check_fence(session: Session, sweep_id: int, owner: str) -> None:
    """Raise :class:`LeaseLost` unless ``owner`` holds the sweep's lease; the row stays
    share-locked until the transaction ends, so no takeover can slip in before it does."""
    row = _locked_row(session, sweep_id, shared=True)
    if row is None or row.owner != owner:
        holder = "" if row is None or row.owner is None else (
            f" (now held by host {row.host} pid {row.pid})")
        raise LeaseLost(f"this scheduler no longer holds the sweep's lease{holder}; "
                        "it stopped without changing anything")
