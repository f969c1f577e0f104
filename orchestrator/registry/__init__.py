"""The SQL run registry: sweeps, their cells, and each cell's attempts.

Contract (for the scheduler and the CLI; each method's docstring has the details)::

    reg = Registry.open(url=None)   # None: --registry / KAPPA_REGISTRY / .kappa/registry.db
    ...
    reg.close()                     # or: with Registry.open(url) as reg: ...

``open`` initialises an empty database to the newest schema and refuses (UserInputError,
exit 2) a database at an older revision, printing ``kappa db upgrade --registry URL``;
``create=False`` (commands that only read) creates nothing and raises ``RegistryMissing``.
SQLite (WAL, foreign keys, busy timeout) and PostgreSQL (``postgresql+psycopg://``; a
plain ``postgresql://`` URL gets the psycopg 3 driver) behave the same.

Every method is ONE transaction and returns frozen snapshots (:class:`SweepRecord`,
:class:`CellRecord`, :class:`AttemptRecord`), never live ORM rows. A cell is named by its
``CellRecord`` or by ``(sweep name, cell id)``. Sweeps: ``upsert_sweep``, ``get_sweep``,
``find_sweep``, ``list_sweeps``, ``delete_sweep`` (cascades). Cells: ``add_cells``
(idempotent, all-or-nothing), ``cells``, ``get_cell`` (id or unique prefix), ``counts``,
``attempts``. State changes are compare-and-set over ``states.TRANSITIONS``:
``transition(cell, expected, new, **fields) -> bool`` is ``False`` when another process
won and nothing was written; forbidden edges raise ``IllegalTransition``; the derived
fields (timestamps, attempts) are set there, never by callers (``transitions.py``).

A typical life: ``add_cells`` -> ``transition(c, PENDING, QUEUED)`` -> executor submit ->
``start_attempt(c, job_id=...)`` -> ``update_progress`` ... -> ``finish_attempt(c,
SUCCEEDED, exit_code=0, final_metrics=...)``; retry: ``transition(c, FAILED, PENDING)``.
"""

from orchestrator.registry.cells import CellRef
from orchestrator.registry.schema import (
    RegistryMissing,
    SchemaState,
    SchemaStatus,
    head_revision,
)
from orchestrator.registry.snapshots import AttemptRecord, CellLike, CellRecord, SweepRecord
from orchestrator.registry.states import (
    TERMINAL_STATES,
    TRANSITIONS,
    AttemptState,
    CellState,
    IllegalTransition,
)
from orchestrator.registry.store import Registry
from orchestrator.registry.sweeps import spec_hash

__all__ = [
    "TERMINAL_STATES",
    "TRANSITIONS",
    "AttemptRecord",
    "AttemptState",
    "CellLike",
    "CellRecord",
    "CellRef",
    "CellState",
    "IllegalTransition",
    "Registry",
    "RegistryMissing",
    "SchemaState",
    "SchemaStatus",
    "SweepRecord",
    "head_revision",
    "spec_hash",
]
