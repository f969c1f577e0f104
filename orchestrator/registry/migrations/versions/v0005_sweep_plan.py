"""Sweeps: the plan, resolved and validated once at submit (``sweeps.plan``, JSON text).

The plan (:class:`orchestrator.grid.plan.SweepPlan`: the grid's layout and size, the
resources, retries, stop rules and search, each search study's starting cell) is what
every step after a submit reads, instead of parsing the stored spec again. The upgrade
plans every sweep already recorded from its stored spec text (without verl's preflight:
the cells were preflighted when they were submitted). A sweep whose spec no longer plans
(a backend gone, a spec an older kappa accepted) keeps a NULL plan: reading it is then
an error whose fix is to submit its spec again.

Cells: ``cells.demand`` (JSON, :class:`orchestrator.backends.base.Demand`): what the
scheduler needs of a cell (its job's resources, expected steps, launch environment),
judged from its validated settings when it is added, so the scheduler validates nothing.
The upgrade judges it for every cell already recorded, from its stored settings and its
sweep's backend; a cell whose settings no longer validate keeps a NULL demand (its
launch then fails as an attempt, as it did when the scheduler validated it).

Revision ID: 0005_sweep_plan
Revises: 0004_scheduler_lease
Create Date: 2027-01-15
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0005_sweep_plan"
down_revision: str | None = "0004_scheduler_lease"
branch_labels: str | None = None
depends_on: str | None = None

LOG = logging.getLogger(__name__)


def plan_of(name: str, spec_text: str) -> str | None:
    """The plan JSON of a recorded sweep, from its stored spec text; ``None`` if it no
    longer plans. A canary sweep stores its grid's spec: its plan is renamed, no retries."""
    from orchestrator.grid.plan import parse_plan
    from orchestrator.paths import is_canary_sweep

    try:
        planned = parse_plan(spec_text, f"<stored spec of {name}>", preflight=False)
        sweep = planned.sweep_plan()
    except Exception as exc:  # any failure leaves the sweep to a resubmit
        LOG.warning("sweep %s: its stored spec no longer plans (%s); submit it again",
                    name, _first_problem(exc))
        return None
    if is_canary_sweep(name):
        sweep = sweep.model_copy(update={"name": name, "retries": 0})
    return sweep.to_json()


def _first_problem(exc: Exception) -> str:
    """The error's summary and its first problem on one line: a UserInputError's summary
    alone ("invalid settings (1 problem(s)):") would not say what to change."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:2]) if lines else type(exc).__name__


def demands_of(backend_name: str, cells: list[tuple[int, dict[str, Any]]]
               ) -> dict[int, dict[str, Any]]:
    """``{row id: Demand JSON}`` of the ``(row id, stored settings)`` of one sweep's cells;
    cells whose settings no longer validate (or whose backend is gone) are left out."""
    from orchestrator.backends import get_backend

    try:
        backend = get_backend(backend_name)
    except Exception:  # a backend gone: its cells cannot launch anyway
        return {}
    found: dict[int, dict[str, Any]] = {}
    for row_id, settings in cells:
        try:
            validated = backend.settings_model.model_validate(dict(settings))
            found[row_id] = backend.demand(validated).to_json()
        except Exception:  # left NULL: the launch reports it
            continue
    return found


def refuse_while_scheduled(connection: sa.Connection) -> None:
    """Refuse the upgrade while a scheduler holds a sweep's lease: an older scheduler
    still running would record cells (search trials) without a demand after it, and
    their launches would then fail. Raises ``UserInputError`` (exit 2) naming them."""
    from datetime import UTC, datetime

    from orchestrator.errors import Problem, UserInputError

    leases = sa.table("sweep_leases", sa.column("sweep_id", sa.Integer()),
                      sa.column("owner", sa.String()), sa.column("host", sa.String()),
                      sa.column("pid", sa.Integer()), sa.column("expires_at", sa.DateTime()))
    sweeps = sa.table("sweeps", sa.column("id", sa.Integer()), sa.column("name", sa.String()))
    now = datetime.now(UTC)
    held = [f"{row.name} (host {row.host} pid {row.pid})" for row in connection.execute(
        sa.select(sweeps.c.name, leases.c.host, leases.c.pid, leases.c.expires_at)
        .join(sweeps, sweeps.c.id == leases.c.sweep_id).where(leases.c.owner.is_not(None)))
        if row.expires_at is not None and _aware(row.expires_at) > now]
    if held:
        raise UserInputError("the registry cannot be upgraded while a scheduler runs", [
            Problem("registry", "a scheduler holds the lease of a sweep",
                    found=", ".join(sorted(held)),
                    fix="let its sweep end, or end that scheduler process (its cells keep "
                        "running; `kappa resume SWEEP` adopts them after the upgrade), "
                        "then run `kappa db upgrade` again")])


def _aware(value: Any) -> Any:
    """A stored time as timezone-aware UTC (SQLite gives it back naive)."""
    from datetime import UTC, datetime

    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def upgrade() -> None:
    refuse_while_scheduled(op.get_bind())
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("plan", sa.Text(), nullable=True))
    with op.batch_alter_table("cells") as batch:
        batch.add_column(sa.Column("demand", sa.JSON(), nullable=True))
    sweeps = sa.table("sweeps", sa.column("id", sa.Integer()), sa.column("name", sa.String()),
                      sa.column("backend", sa.String()), sa.column("spec_text", sa.Text()),
                      sa.column("plan", sa.Text()))
    connection = op.get_bind()
    for row in connection.execute(sa.select(sweeps.c.id, sweeps.c.name, sweeps.c.spec_text)):
        text = plan_of(row.name, row.spec_text)
        if text is not None:
            connection.execute(sa.update(sweeps).where(sweeps.c.id == row.id).values(plan=text))
    _judge_cells(connection, sweeps)


def _judge_cells(connection: sa.Connection, sweeps: sa.TableClause) -> None:
    """Store every recorded cell's demand, one sweep at a time (one batched update each)."""
    cells = sa.table("cells", sa.column("id", sa.Integer()), sa.column("sweep_id", sa.Integer()),
                     sa.column("settings", sa.JSON()), sa.column("demand", sa.JSON()))
    backends = connection.execute(sa.select(sweeps.c.id, sweeps.c.backend)).all()
    for sweep_id, backend_name in backends:
        rows = connection.execute(sa.select(cells.c.id, cells.c.settings)
                                  .where(cells.c.sweep_id == sweep_id)).all()
        found = demands_of(backend_name, [(r.id, r.settings) for r in rows])
        if found:
            connection.execute(
                sa.update(cells).where(cells.c.id == sa.bindparam("row_id"))
                .values(demand=sa.bindparam("judged")),
                [{"row_id": k, "judged": v} for k, v in found.items()])


def downgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.drop_column("demand")
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("plan")
