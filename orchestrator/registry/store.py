"""The :class:`Registry` (contract: the package docstring), its methods mixed in by
concept: ``connection.py``, ``sweeps.py``, ``cells.py``, ``cell_updates.py``; the lease
methods (thin transactions over ``leases.py``) are here."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.registry.cell_updates import CellUpdates
from orchestrator.registry.cells import CellStore
from orchestrator.registry.leases import (
    Claimant,
    Lease,
    current_lease,
    release_lease,
    renew_lease,
    take_lease,
)
from orchestrator.registry.sweeps import SweepStore


class Registry(SweepStore, CellStore, CellUpdates):
    """The SQL run registry. Open with :meth:`open`; every method is one transaction."""

    # -- leases (see .leases) ------------------------------------------------------------
    def take_lease(self, sweep: str, me: Claimant, seconds: float,
                   holder_dead: Callable[[Lease], bool] | None = None
                   ) -> tuple[bool, Lease | None]:
        """Take the sweep's lease if free, ours, expired or its holder is dead;
        (taken?, the lease now)."""
        with self._tx() as session:
            return take_lease(session, sweep, me, seconds, holder_dead)

    def renew_lease(self, sweep: str, owner: str, seconds: float) -> bool:
        """The owner's heartbeat; ``False`` when the lease is no longer theirs."""
        with self._tx() as session:
            return renew_lease(session, sweep, owner, seconds)

    def release_lease(self, sweep: str, owner: str) -> bool:
        """The owner gives the lease up."""
        with self._tx() as session:
            return release_lease(session, sweep, owner)

    def lease(self, sweep: str) -> Lease | None:
        """Who drives ``sweep`` (the lease may have expired), or ``None``."""
        with self._tx() as session:
            return current_lease(session, sweep)
