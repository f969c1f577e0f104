"""Where Optuna keeps a search's studies: beside the registry, never in its tables (both
stamp a table ``alembic_version``; docs/search.md). SQLite: a sibling file
``registry.optuna.db``; PostgreSQL: the same database, schema ``kappa_optuna`` (created on
first use), reached through the connection's ``search_path``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

OPTUNA_SCHEMA = "kappa_optuna"
#: A study's user attribute holding the error that stopped it (shown by status and tables).
ERROR_ATTR = "kappa.error"


def optuna_storage_url(registry_engine: Any) -> tuple[str, dict[str, Any]]:
    """``(url, engine_kwargs)`` of the studies' storage for a registry's engine."""
    url = registry_engine.url
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if not database or database == ":memory:":
            raise ValueError("an adaptive search needs a registry stored in a file or server")
        path = Path(database)
        sibling = path.with_name(f"{path.stem}.optuna{path.suffix or '.db'}")
        return f"sqlite:///{sibling}", {"connect_args": {"timeout": 60}}
    if url.get_backend_name() == "postgresql":
        from sqlalchemy import text

        with registry_engine.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {OPTUNA_SCHEMA}"))
        rendered = url.render_as_string(hide_password=False)
        return rendered, {"connect_args": {"options": f"-csearch_path={OPTUNA_SCHEMA}"}}
    raise ValueError(f"no Optuna storage for a {url.get_backend_name()} registry")


def open_storage(registry_engine: Any) -> Any:
    """The ``optuna.storages.RDBStorage`` of a registry (created on first use)."""
    import optuna

    url, kwargs = optuna_storage_url(registry_engine)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
