"""The registry is the only record of a sweep: its executor, and who drives it.

* ``sweeps.executor_name`` / ``sweeps.executor_options``: the executor a sweep's cells
  run on and its options (JSON; a URL's password is never stored: see
  ``orchestrator.sweeps.executor_choice``), so a scheduler on any machine sharing
  the registry continues on it (this was ``<KAPPA_HOME>/scheduler/<sweep>.executor.json``).
* ``sweep_leases``: the scheduler that owns a sweep, as a lease with a heartbeat (this
  was a per-machine ``flock``): owner (a uuid per scheduler), its host and pid,
  when it was taken, last renewed, and when it expires unless renewed.

Revision ID: 0004_scheduler_lease
Revises: 0003_stop_reason
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004_scheduler_lease"
down_revision: str | None = "0003_stop_reason"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("executor_name", sa.String(64), nullable=True))
        batch.add_column(sa.Column("executor_options", sa.JSON(), nullable=True))
    op.create_table(
        "sweep_leases",
        sa.Column("sweep_id", sa.Integer(), sa.ForeignKey("sweeps.id", ondelete="CASCADE"),
                  primary_key=True, autoincrement=False),
        sa.Column("owner", sa.String(36), nullable=True),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("host_id", sa.String(200), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("pid_start", sa.BigInteger(), nullable=True),
        sa.Column("lease_seconds", sa.Float(), nullable=True),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("sweep_leases")
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("executor_options")
        batch.drop_column("executor_name")
