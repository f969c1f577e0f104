"""The connection under :class:`~.store.Registry`: engine, sessions, the lease fence.

:meth:`RegistryConnection.open` is the one way in; the sweep, cell and lease methods
(``sweeps.py``, ``cells.py``, ``cell_updates.py``, ``store.py``) all run their
transactions through ``_tx`` (writes) and ``_read`` (reads).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Self

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from orchestrator import paths
from orchestrator.registry.engine import (
    display_url,
    make_engine,
    missing_sqlite_file,
    normalize_url,
    unreachable,
)
from orchestrator.registry.leases import check_fence
from orchestrator.registry.schema import RegistryMissing, ensure_schema


class RegistryConnection:
    """An open registry database; every method of a subclass is one transaction."""

    def __init__(self, engine: Engine, fence: str | None = None) -> None:
        """Wrap an engine whose schema is already current (use :meth:`open`)."""
        self.engine = engine
        self.fence = fence
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def fenced(self, owner: str) -> Self:
        """This registry (same engine) for the scheduler holding the lease ``owner``:
        every cell write first checks, in its own transaction, that ``owner`` still holds
        the sweep's lease, else raises :class:`~.leases.LeaseLost` and writes nothing."""
        return type(self)(self.engine, fence=owner)

    def _check_fence(self, session: Session, sweep_id: int) -> None:
        if self.fence is not None:
            check_fence(session, sweep_id, self.fence)

    # -- lifecycle ---------------------------------------------------------------------
    @classmethod
    def open(cls, url: str | None = None, *, create: bool = True) -> Self:
        """Connect to ``url`` (default: :func:`orchestrator.paths.registry_url`).

        An empty database is initialised, or with ``create=False`` (commands that only
        read) refused: :class:`RegistryMissing`, and no file or folder is made. An
        outdated or unknown schema raises :class:`UserInputError` with the fix
        (``kappa db upgrade --registry URL``); so does a server that cannot be reached.
        """
        parsed = normalize_url(paths.registry_url(url))
        if not create and missing_sqlite_file(parsed):
            raise RegistryMissing(display_url(parsed))
        engine = make_engine(parsed)
        try:
            ensure_schema(engine, create=create)
        except OperationalError as exc:
            engine.dispose()
            if parsed.get_backend_name() == "sqlite":
                raise
            raise unreachable(parsed, exc) from None
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    @property
    def url(self) -> str:
        """The database URL, password masked."""
        return display_url(self.engine.url)

    def close(self) -> None:
        """Release every connection."""
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        with self._sessions.begin() as session:
            yield session

    @contextmanager
    def _read(self) -> Iterator[Session]:
        """A session for reads. On PostgreSQL it holds no transaction (autocommit): the
        server ends a transaction idle for as long as a lease (``engine.py``), and a
        client turning 100,000 rows into snapshots is that idle on a busy machine; a read
        of single SELECTs needs none. SQLite reads keep the ordinary transaction."""
        if self.engine.dialect.name != "postgresql":
            with self._tx() as session:
                yield session
            return
        with self.engine.connect() as connection:
            auto = connection.execution_options(isolation_level="AUTOCOMMIT")
            with Session(bind=auto, expire_on_commit=False) as session:
                yield session
