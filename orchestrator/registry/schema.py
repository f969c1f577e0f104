"""The registry schema's version (Alembic migrations shipped in the package). An empty database is
initialised to the newest revision; an OLDER one is refused with the exact
``kappa db upgrade --registry URL`` (kappa never migrates data behind a user's back), as is a newer
one or tables without a stamp. Check and initialisation are one transaction under a lock (SQLite's
``BEGIN IMMEDIATE``, a PostgreSQL advisory lock): concurrent first opens are safe."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from orchestrator.errors import Problem, UserInputError
from orchestrator.registry.engine import display_url

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Spelled out so that opening an up-to-date registry (every command does) is one SELECT
# without importing Alembic (~1 s); a test checks it is the newest migration's id.
HEAD_REVISION = "0006_provenance"
# Any constant works; it only has to be the same for every kappa process.
_PG_LOCK_KEY = 0x6B61707061  # "kappa"


class SchemaState(StrEnum):
    """How a database's schema revision compares with this code's newest."""

    EMPTY = "empty"
    CURRENT = "current"
    OUTDATED = "outdated"
    NEWER = "newer"
    FOREIGN = "foreign"


@dataclass(frozen=True)
class SchemaStatus:
    """A database's revision (``None`` if unstamped) against the code's ``head``."""

    current: str | None
    head: str
    state: SchemaState


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations (and at ``connection``)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def known_revisions() -> list[str]:
    """Every shipped revision, oldest first (read from the migration files)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def head_revision() -> str:
    """The newest migration revision this code ships."""
    return known_revisions()[-1]


def _status(connection: Connection, lock: bool = False) -> SchemaStatus:
    """The schema's status, under the schema lock if asked (on PostgreSQL; a SQLite
    transaction is one)."""
    from alembic.runtime.migration import MigrationContext

    if lock and connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
    known = known_revisions()
    head = known[-1]
    current = MigrationContext.configure(connection).get_current_revision()
    if current is None:
        tables = set(inspect(connection).get_table_names()) - {"alembic_version"}
        return SchemaStatus(None, head, SchemaState.FOREIGN if tables else SchemaState.EMPTY)
    if current == head:
        return SchemaStatus(current, head, SchemaState.CURRENT)
    return SchemaStatus(current, head,
                        SchemaState.OUTDATED if current in known else SchemaState.NEWER)


def schema_status(engine: Engine) -> SchemaStatus:
    """Where the database's schema stands; changes nothing."""
    with engine.connect() as connection:
        return _status(connection)


def upgrade_schema(engine: Engine, revision: str = "head") -> tuple[SchemaStatus, SchemaStatus]:
    """Migrate the database to ``revision`` in one transaction; the status before and after."""
    from alembic import command
    from alembic.util.exc import CommandError

    with engine.begin() as connection:
        before = _status(connection, lock=True)
        if before.state in (SchemaState.NEWER, SchemaState.FOREIGN):
            raise _refusal(before, display_url(engine.url))
        try:
            command.upgrade(alembic_config(connection), revision)
        except CommandError as exc:
            raise UserInputError("cannot migrate the registry", [Problem(
                "revision", str(exc), found=revision,
                allowed=", ".join(["head", *known_revisions()]))]) from None
        after = _status(connection)
    return before, after


class RegistryMissing(UserInputError):
    """A command that only reads found no registry (and created none)."""

    def __init__(self, url: str) -> None:
        super().__init__(f"no kappa registry at {url} yet", [Problem(
            "registry", "the database does not exist yet (or holds no kappa tables)", found=url,
            fix="`kappa submit SPEC` creates it; or point KAPPA_HOME, KAPPA_REGISTRY or "
                "--registry at an existing one")])


def ensure_schema(engine: Engine, create: bool = True) -> SchemaStatus:
    """Initialise an empty database (unless not ``create``); accept a current one only."""
    if _quick_revision(engine) == HEAD_REVISION:
        return SchemaStatus(HEAD_REVISION, HEAD_REVISION, SchemaState.CURRENT)
    from alembic import command

    with engine.begin() as connection:
        status = _status(connection, lock=True)
        if status.state is SchemaState.EMPTY:
            if not create:
                raise RegistryMissing(display_url(engine.url))
            command.upgrade(alembic_config(connection), "head")
            return _status(connection)
    if status.state is not SchemaState.CURRENT:
        raise _refusal(status, display_url(engine.url))
    return status


def _quick_revision(engine: Engine) -> str | None:
    """The stamped revision by plain SQL, or ``None`` if there is no stamp (yet)."""
    with engine.connect() as connection:
        try:
            value = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
        except DBAPIError:
            return None
        return None if value is None else str(value)


def _refusal(status: SchemaStatus, url: str) -> UserInputError:
    if status.state is SchemaState.OUTDATED:
        return UserInputError(
            "the registry database was created by an older kappa and must be migrated first",
            [Problem("registry", "schema revision is older than this kappa's",
                     found=f"revision {status.current} at {url}", allowed=f"revision {status.head}",
                     fix=f"kappa db upgrade --registry '{url}'")])
    if status.state is SchemaState.NEWER:
        return UserInputError("the registry database was created by a newer kappa", [Problem(
            "registry", "schema revision unknown to this kappa (newer?)",
            found=f"revision {status.current} at {url}", allowed=", ".join(known_revisions()),
            fix="upgrade kappa, or point --registry at another database")])
    return UserInputError("the database is not a kappa registry", [Problem(
        "registry", "it has tables but no kappa schema revision", found=url,
        fix="point --registry (or KAPPA_REGISTRY) at another database")])
