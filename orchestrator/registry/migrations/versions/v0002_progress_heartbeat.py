"""Cells: when progress was last reported (a heartbeat), and an index for state queries.

``progress_updated_at`` lets the scheduler tell a stalled run from a slow one; the
``(sweep_id, state)`` index serves ``cells(sweep, states)`` and ``counts(sweep)``.

Revision ID: 0002_progress_heartbeat
Revises: 0001_initial
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002_progress_heartbeat"
down_revision: str | None = "0001_initial"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.add_column(sa.Column("progress_updated_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_cells_sweep_state", "cells", ["sweep_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_cells_sweep_state", table_name="cells")
    with op.batch_alter_table("cells") as batch:
        batch.drop_column("progress_updated_at")
