"""The connection under :class:`~orchestrator.registry.Registry` (opened by
:meth:`RegistryConnection.open`): engine, sessions (``_tx`` for writes, ``_read`` for reads), and
the row lookups and value checks the sweep, cell and lease methods share."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Self, cast

from sqlalchemy import ColumnElement, CursorResult, Engine, Update, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from orchestrator import paths
from orchestrator.errors import Problem, UserInputError, unknown_name
from orchestrator.redact import one_line
from orchestrator.registry.engine import (
    display_url,
    make_engine,
    missing_sqlite_file,
    normalize_url,
    unreachable,
    unusable_sqlite,
)
from orchestrator.registry.models import Base, CellRow, SweepRow
from orchestrator.registry.schema import RegistryMissing, ensure_schema


class RegistryConnection:
    """An open registry database; every method of a subclass is one transaction."""

    def __init__(self, engine: Engine, fence: str | None = None) -> None:
        """Wrap an engine whose schema is current (use :meth:`open`)."""
        self.engine = engine
        self.fence = fence
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def fenced(self, owner: str) -> Self:
        """This registry (same engine) for the scheduler holding the lease ``owner``:
        every cell write first checks, in its own transaction, that ``owner`` still holds
        the sweep's lease, else raises :class:`~.leases.LeaseLost` and writes nothing."""
        return type(self)(self.engine, fence=owner)

    @classmethod
    def open(cls, url: str | None = None, *, create: bool = True) -> Self:
        """Connect to ``url`` (default: :func:`orchestrator.paths.registry_url`). An empty
        database is initialised, or with ``create=False`` refused (:class:`RegistryMissing`,
        nothing made). An outdated or unknown schema, or a server out of reach, is a
        :class:`UserInputError` with the fix."""
        parsed = normalize_url(paths.registry_url(url))
        if not create and missing_sqlite_file(parsed):
            raise RegistryMissing(display_url(parsed))
        engine = make_engine(parsed)
        try:
            ensure_schema(engine, create=create)
        except BaseException as exc:
            engine.dispose()
            if isinstance(exc, OperationalError) and parsed.get_backend_name() != "sqlite":
                raise unreachable(parsed, exc) from None
            if (error := unusable_sqlite(parsed, exc)) is not None:
                raise error from None
            raise
        return cls(engine)

    @classmethod
    def existing(cls, url: str | None = None) -> Self | None:
        """:meth:`open` with ``create=False``, or ``None`` when there is no registry there
        (reading never creates one)."""
        try:
            return cls.open(url, create=False)
        except RegistryMissing:
            return None

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

    def read_all(self) -> None:
        """Read the whole registry: SQLite's integrity check, then every row of every table
        decoded; a ``UserInputError`` naming what is damaged (:func:`unusable_sqlite`)."""
        with self._tx() as session:
            check = "PRAGMA integrity_check"
            if self.engine.dialect.name == "sqlite" and (found := [
                    str(r) for (r,) in session.execute(text(check)) if r != "ok"]):
                raise UserInputError(f"the registry {self.url} is damaged", [Problem(
                    "registry", one_line(line[:300]), fix="restore it from a backup")
                    for line in found])
            for mapper in Base.registry.mappers:
                for _row in session.scalars(select(mapper.class_)).yield_per(1000):
                    pass

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        try:
            with self._sessions.begin() as session:
                yield session
        except Exception as exc:  # a SQLite file damaged since it was opened
            if (error := unusable_sqlite(self.engine.url, exc)) is None:
                raise
            raise error from None

    @contextmanager
    def _read(self) -> Iterator[Session]:
        """A session for reads; on PostgreSQL without a transaction (autocommit): the server
        ends one idle as long as a lease (``leases.py``), which a busy client turning
        100,000 rows into snapshots may be, and single SELECTs need none."""
        if self.engine.dialect.name != "postgresql":
            with self._tx() as session:
                yield session
            return
        with self.engine.connect() as connection:
            auto = connection.execution_options(isolation_level="AUTOCOMMIT")
            with Session(bind=auto, expire_on_commit=False) as session:
                yield session


def jsonable(value: Any, what: str) -> Any:
    """A JSON-clean copy (pydantic models dumped, tuples to lists); TypeError if impossible."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from None


def check_fields(fields: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    """TypeError naming the fields that are not in ``allowed``."""
    if extra := sorted(set(fields) - allowed):
        raise TypeError(f"{what} got unknown field(s) {extra}; allowed: {sorted(allowed)}")


def updated_one(session: Session, statement: Update) -> bool:
    """Run a bulk UPDATE; whether it changed exactly one row (a compare-and-set's answer)."""
    result = cast(CursorResult[Any], session.execute(
        statement.execution_options(synchronize_session=False)))
    return result.rowcount == 1


def insert_missing(session: Session, table: type[Base], key: str, **values: Any) -> None:
    """Insert a row of ``values`` unless one with its ``key`` exists (a race with another
    inserter is settled by the unique key: the loser's insert does nothing)."""
    from sqlalchemy.dialects import postgresql, sqlite

    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    session.execute(dialect.insert(table).values(**values)
                    .on_conflict_do_nothing(index_elements=[key]))


def sweep_row(session: Session, name: str, lock: bool = False) -> SweepRow:
    """The sweep's row (locked FOR UPDATE if asked); unknown names list the known ones."""
    query = select(SweepRow).where(SweepRow.name == name)
    row = session.scalar(query.with_for_update() if lock else query)
    if row is None:
        known = session.scalars(select(SweepRow.name)).all()
        raise unknown_name("sweep", name, known, location="sweep")
    return row


def of_sweep(name: str) -> ColumnElement[bool]:
    """The condition "a cell of sweep ``name``", its id looked up inside the statement:
    one round trip per query instead of two (a scheduler makes a dozen per cell). A query
    that finds nothing asks :func:`sweep_row`, which names an unknown sweep."""
    return CellRow.sweep_id == select(SweepRow.id).where(SweepRow.name == name).scalar_subquery()


def cell_row(session: Session, sweep: str, ref: str, prefix: bool = False) -> CellRow:
    """The cell ``ref`` of ``sweep`` (or with ``prefix``, the only one starting with it)."""
    if (row := session.scalar(select(CellRow).where(of_sweep(sweep),
                                                    CellRow.cell_id == ref))) is not None:
        return row
    in_sweep = select(CellRow).where(CellRow.sweep_id == sweep_row(session, sweep).id)
    matches: list[CellRow] = []
    if prefix and ref and ref.isalnum():
        matches = list(session.scalars(
            in_sweep.where(CellRow.cell_id.startswith(ref)).order_by(CellRow.cell_id).limit(6)))
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UserInputError(f"cell prefix '{ref}' is ambiguous in sweep '{sweep}'", [Problem(
            "cell", "more than one cell id starts with it", found=ref,
            allowed=", ".join(m.cell_id for m in matches[:5]),
            fix="give more characters of the cell id")])
    raise UserInputError(f"no cell '{ref}' in sweep '{sweep}'", [Problem(
        "cell", "no cell id is or starts with it", found=ref,
        fix=f"`kappa status {sweep}` lists the sweep's cells")])
