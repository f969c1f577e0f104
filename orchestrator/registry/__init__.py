"""The SQL run registry: sweeps, their cells, and each cell's attempts.

``with Registry.open(url) as reg:`` (``None``: --registry / KAPPA_REGISTRY / .kappa/registry.db)
initialises an empty database to the newest schema and refuses an older one (exit 2, with
``kappa db upgrade --registry URL``); ``create=False`` creates nothing and raises
``RegistryMissing``. SQLite and PostgreSQL behave the same.

Every method is ONE transaction returning frozen snapshots (:class:`SweepRecord`,
:class:`CellRecord`, :class:`AttemptRecord`). A cell is named by its ``CellRecord`` or
``(sweep name, cell id)``. ``transition(cell, expected, new, **fields)`` is a compare-and-set over
``states.TRANSITIONS``: ``False`` when another process won (nothing written), ``IllegalTransition``
for a forbidden edge; derived fields (timestamps, attempts) are set in ``cells.apply_transition``
only. A typical life: ``add_cells`` -> ``transition(c, PENDING, QUEUED)`` ->
``start_attempt(c, job_id=...)`` -> ``update_progress`` ... ->
``finish_attempt(c, SUCCEEDED, exit_code=0, ...)``; retry: ``transition(c, FAILED, PENDING)``."""

from orchestrator.registry.cells import CellRef, CellStore
from orchestrator.registry.schema import RegistryMissing, SchemaState, SchemaStatus, head_revision
from orchestrator.registry.snapshots import AttemptRecord, CellLike, CellRecord, SweepRecord
from orchestrator.registry.states import (
    TERMINAL_STATES,
    TRANSITIONS,
    AttemptState,
    CellState,
    IllegalTransition,
)
from orchestrator.registry.sweeps import SweepStore, spec_hash

__all__ = ["TERMINAL_STATES", "TRANSITIONS", "AttemptRecord", "AttemptState", "CellLike",
           "CellRecord", "CellRef", "CellState", "IllegalTransition", "Registry",
           "RegistryMissing", "SchemaState", "SchemaStatus", "SweepRecord", "head_revision",
           "spec_hash"]


class Registry(SweepStore, CellStore):
    """The SQL run registry (the contract above); open with :meth:`open`."""
