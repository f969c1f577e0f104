"""Connecting to the registry database: SQLite by default, PostgreSQL by URL.

SQLite runs in WAL mode (readers never block the writer), with foreign keys and a busy timeout
(concurrent kappa processes wait for each other). Every SQLite transaction starts with
``BEGIN IMMEDIATE``: the write lock is taken up front, so a read-then-write transaction never loses
a lock upgrade half-way, and migrations are transactional."""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError

from orchestrator.errors import Problem, UserInputError
from orchestrator.redact import one_line, redact

BUSY_TIMEOUT_MS = 30_000
SUPPORTED = "sqlite:///PATH, postgresql+psycopg://USER@HOST:PORT/DB"


def normalize_url(url: str) -> URL:
    """Parse a registry URL; plain ``postgresql://``/``postgres://`` get the psycopg 3 driver."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: e.g. a port that is no number
        raise UserInputError("cannot parse the registry URL", [Problem(
            "registry", str(exc), found=redact(url), allowed=SUPPORTED)]) from None
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend != "sqlite":
        raise UserInputError(f"unsupported registry database '{backend}'", [Problem(
            "registry", "only SQLite and PostgreSQL are supported", found=display_url(parsed),
            allowed=SUPPORTED)])
    return parsed


def display_url(url: URL | str) -> str:
    """The URL as a user would type it, with any password masked."""
    try:
        parsed = make_url(url)  # a URL is returned as it is
    except (ArgumentError, ValueError):
        return redact(str(url))
    return parsed.render_as_string(hide_password=True)


def missing_sqlite_file(url: URL) -> bool:
    """Whether ``url`` names a SQLite file that does not exist (opening would create it)."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return False
    return not Path(url.database).expanduser().exists()


def unreachable(url: URL, exc: Exception) -> UserInputError:
    """The error for a registry server that refused or failed the connection."""
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return UserInputError(f"cannot connect to the registry at {display_url(url)}", [Problem(
        "registry", redact(reason[0] if reason else type(exc).__name__), found=display_url(url),
        fix="check the server is up and the URL's host, port, user and password")])


# What SQLite says of a file it cannot read: damaged pages, text that is no longer UTF-8, a
# schema whose names were hit (the schema was checked when the registry was opened).
_DAMAGE = ("malformed", "not a database", "decode to UTF-8", "no such column", "no such table",
           "corrupt")


def unusable_sqlite(url: Any, exc: BaseException) -> UserInputError | None:
    """The error for a SQLite registry kappa cannot use: damaged (a disk error, a copy taken
    while kappa wrote to it, a file that is no database), out of reach (no access), or on a
    full disk; ``None`` for anything else (a constraint, a busy lock, kappa's own code failing
    around a read). A row that no longer decodes shows as a ``ValueError`` inside SQLAlchemy."""
    if url.get_backend_name() != "sqlite":
        return None
    damaged = isinstance(exc, ValueError) and _inside_sqlalchemy(exc)  # UnicodeDecodeError too
    if not (damaged or isinstance(exc, DatabaseError)):
        return None
    reason = f"{type(exc).__name__}: {exc}" if damaged else str(getattr(exc, "orig", exc))
    file = url.database
    if "disk is full" in reason:
        summary, fix = f"the disk of the registry {file} is full", (
            "free space on it, then `kappa resume` each sweep whose scheduler stopped")
    elif any(m in reason for m in ("unable to open", "readonly", "permission")):
        summary, fix = f"cannot read the registry {file}", (
            "check that you may read and write the file and its folder")
    elif damaged or any(m in reason for m in _DAMAGE):
        summary, fix = f"cannot read the registry {file}", (
            "the file is damaged or not kappa's (`kappa db check` reads all of it): restore it "
            f"from a backup, or move it aside (mv {file} {file}.broken) to start an empty one")
    else:
        return None
    return UserInputError(summary, [Problem("registry", one_line(reason.strip()[:300]),
                                            found=display_url(url), fix=fix)])


def _inside_sqlalchemy(exc: BaseException) -> bool:
    return any(f"{os.sep}sqlalchemy{os.sep}" in frame.f_code.co_filename
               for frame, _ in traceback.walk_tb(exc.__traceback__))


def server_away(exc: BaseException) -> bool:
    """Whether ``exc`` says a PostgreSQL registry could not be reached or dropped the
    connection (refused, reset, shut down, starting up), worth waiting for: judged by the
    server's error class (08: connection; 57P01-57P03: shutdown, crash, not yet accepting),
    or by none at all (the client's own "connection failed"), never by a message. Never a
    session the server ended for idling in a transaction: that is a lease's fencing."""
    orig = getattr(exc, "orig", None)
    if type(orig).__module__.split(".")[0] != "psycopg" or not isinstance(orig, Exception):
        return False
    import psycopg

    state = getattr(orig, "sqlstate", None)
    return isinstance(orig, psycopg.OperationalError) and (
        state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03"))


def make_engine(url: str | URL) -> Engine:
    """An engine for the registry at ``url`` (the SQLite file's folder is created)."""
    parsed = normalize_url(url) if isinstance(url, str) else url
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event below own transaction start (pysqlite's own
        # implicit BEGIN would be deferred and skip DDL).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _use_wal(cursor)
        cursor.execute("PRAGMA foreign_keys = ON")
        # WAL + NORMAL: a crash loses at most the last commits, never atomicity.
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _use_wal(cursor: Any) -> None:
    """Put the database file in WAL mode (stored in the file: later, one read). The switch
    needs an exclusive lock, and SQLite answers "database is locked" at once (no busy
    handler) when two connections race to make it, so it is retried up to the timeout."""
    import sqlite3

    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)
