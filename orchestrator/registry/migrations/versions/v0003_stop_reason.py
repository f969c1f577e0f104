"""Cells: why a stopping rule (or the sweep's GPU-hours cap) ended the cell.

``stop_reason`` is ``None`` for a cell that ran to its end; otherwise the sentence the
scheduler recorded (``plateau at step 340 (val-core/...)``, ``diverged at step 12 (...)``,
``gpu_hours cap: ...``). A rerun clears it.

Revision ID: 0003_stop_reason
Revises: 0002_progress_heartbeat
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003_stop_reason"
down_revision: str | None = "0002_progress_heartbeat"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.add_column(sa.Column("stop_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.drop_column("stop_reason")
