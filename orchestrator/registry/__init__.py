"""The SQL run registry: sweeps, their cells, and each cell's attempts.

Contract (for the scheduler and the CLI)
----------------------------------------
Open / close::

    reg = Registry.open(url=None)   # None: --registry / KAPPA_REGISTRY / .kappa/registry.db
    ...
    reg.close()                     # or: with Registry.open(url) as reg: ...

``open`` initialises an empty database to the newest schema and refuses (UserInputError,
exit 2) a database at an older revision, printing ``kappa db upgrade --registry URL``.
``Registry.open(url, create=False)`` (for commands that only read) creates nothing: a
missing or empty database raises ``RegistryMissing`` (a UserInputError).
SQLite (WAL, foreign keys, busy timeout) and PostgreSQL (``postgresql+psycopg://``; a
plain ``postgresql://`` URL gets the psycopg 3 driver) behave the same.

Every method is ONE transaction and returns frozen snapshots (:class:`SweepRecord`,
:class:`CellRecord`, :class:`AttemptRecord`), never live ORM rows. A cell is named by its
``CellRecord`` or by ``(sweep name, cell id)``.

Sweeps
    ``upsert_sweep(name, *, backend, spec_text, mlflow_experiment_id=None,
    mlflow_parent_run_id=None, plan=None) -> SweepRecord`` (``spec_hash`` = SHA-256 of
    the text; MLflow ids and the plan, JSON made at submit, only overwritten when
    given), ``get_sweep(name)`` (unknown name: UserInputError listing the known ones),
    ``find_sweep(name) -> SweepRecord | None``, ``list_sweeps()`` (newest first),
    ``delete_sweep(name) -> bool`` (cascades; for undoing a submit that failed midway).
Cells
    ``add_cells(sweep, cells, *, max_retries=0, demands=None) -> list[CellRecord]``:
    idempotent, returns only the new cells; existing cell ids are untouched; all-or-nothing.
    ``cells`` is any iterable of objects with ``cell_id, index, axes, settings, labels``
    (:class:`CellLike`; ``orchestrator.grid.Cell`` fits; pydantic settings are dumped);
    ``demands`` maps cell ids to what the scheduler needs of each (``CellRecord.demand``).
    ``cells(sweep, states=None)`` (by index), ``get_cell(sweep, id_or_unique_prefix)``,
    ``counts(sweep) -> dict[CellState, int]`` (every state present),
    ``attempts(cell) -> list[AttemptRecord]``.
State changes (compare-and-set; see ``states.TRANSITIONS``)
    ``transition(cell, expected, new, **fields) -> bool``: ``True`` iff the cell was in
    one of ``expected`` and is now ``new``; ``False`` means another process won (or the
    state moved on) and nothing was written. Forbidden edges raise ``IllegalTransition``.
    Derived fields are set here, never by callers: ``queued_at`` on queued,
    ``started_at`` + ``attempts_count += 1`` + a new attempt on running, ``finished_at``
    + closing the open attempt on a terminal state; entering pending clears job id,
    exit code, timestamps and final metrics.
    ``start_attempt(cell, *, job_id=None, log_path=None) -> AttemptRecord | None``
    (queued -> running), ``finish_attempt(cell, state, *, exit_code=None,
    last_error=None, final_metrics=None) -> bool`` (running -> terminal).
Other updates
    ``update_cell(cell, **fields)`` (run_dir, mlflow_run_id, job_id, max_retries,
    last_error), ``attach_job(cell, job_id) -> bool`` (running cell + its open attempt),
    ``update_progress(cell, step, total_steps=None) -> bool`` (running cells only; also
    stamps ``progress_updated_at``, a heartbeat).

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
