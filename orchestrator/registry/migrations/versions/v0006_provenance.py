"""Cells and attempts: what made a run's numbers (``provenance``, JSON).

Each attempt stores the provenance its launched process recorded
(:mod:`orchestrator.runs.provenance`: kappa's version and commit, the backend's numerics,
the machine); the cell keeps a copy of its latest ended attempt's, which the tables
compare. Rows from before this revision have none (``NULL``): tables say their provenance
is unknown, and ``kappa plan`` counts their finished cells as stale.

Revision ID: 0006_provenance
Revises: 0005_sweep_plan
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006_provenance"
down_revision: str | None = "0005_sweep_plan"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    for table in ("cells", "attempts"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("provenance", sa.JSON(), nullable=True))


def downgrade() -> None:
    for table in ("attempts", "cells"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("provenance")
