"""Initial registry schema: sweeps, cells, attempts.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def _ts(name: str, nullable: bool = True) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("backend", sa.String(64), nullable=False),
        sa.Column("spec_text", sa.Text(), nullable=False),
        sa.Column("spec_hash", sa.String(64), nullable=False),
        sa.Column("mlflow_experiment_id", sa.String(64), nullable=True),
        sa.Column("mlflow_parent_run_id", sa.String(64), nullable=True),
        _ts("created_at", nullable=False),
        _ts("updated_at", nullable=False),
    )
    op.create_table(
        "cells",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "sweep_id",
            sa.Integer(),
            sa.ForeignKey("sweeps.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("cell_id", sa.String(64), nullable=False),
        sa.Column("cell_index", sa.Integer(), nullable=False),
        sa.Column("axes", sa.JSON(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts_count", sa.Integer(), nullable=False),
        sa.Column("max_retries", sa.Integer(), nullable=False),
        sa.Column("run_dir", sa.Text(), nullable=True),
        sa.Column("mlflow_run_id", sa.String(64), nullable=True),
        sa.Column("job_id", sa.String(200), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("progress_step", sa.Integer(), nullable=True),
        sa.Column("total_steps", sa.Integer(), nullable=True),
        sa.Column("final_metrics", sa.JSON(), nullable=True),
        _ts("created_at", nullable=False),
        _ts("queued_at"),
        _ts("started_at"),
        _ts("finished_at"),
        sa.UniqueConstraint("sweep_id", "cell_id", name="uq_cells_sweep_cell"),
    )
    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "cell_pk",
            sa.Integer(),
            sa.ForeignKey("cells.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("job_id", sa.String(200), nullable=True),
        _ts("started_at", nullable=False),
        _ts("finished_at"),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("log_path", sa.Text(), nullable=True),
        sa.UniqueConstraint("cell_pk", "number", name="uq_attempts_cell_number"),
    )


def downgrade() -> None:
    op.drop_table("attempts")
    op.drop_table("cells")
    op.drop_table("sweeps")
