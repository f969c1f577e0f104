"""Alembic environment for the kappa registry (configured in code; see ``schema.py``). kappa
hands Alembic a connection inside a transaction: a migration and the checks around it
commit together or not at all."""

from __future__ import annotations

from alembic import context

from orchestrator.registry.models import Base


def run_migrations_online() -> None:
    """Run the migrations on the connection kappa passed in ``config.attributes``."""
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("kappa runs registry migrations only through orchestrator.registry")
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite cannot ALTER most things in place; batch mode copies the table.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported")
run_migrations_online()
