"""Schema revisions: fresh databases are initialised, old/new/foreign ones refused."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from orchestrator.errors import UserInputError
from orchestrator.registry import Registry, SchemaState, head_revision
from orchestrator.registry.engine import make_engine
from orchestrator.registry.models import Base
from orchestrator.registry.schema import (
    HEAD_REVISION,
    known_revisions,
    schema_status,
    upgrade_schema,
)

OLDEST = "0001_initial"


def test_ships_more_than_one_revision() -> None:
    revisions = known_revisions()
    assert revisions[0] == OLDEST and revisions[-1] == head_revision()
    assert len(revisions) >= 2
    # The fast path of Registry.open compares against this constant.
    assert head_revision() == HEAD_REVISION


def test_fresh_database_is_initialised(registry_url: str) -> None:
    engine = make_engine(registry_url)
    assert schema_status(engine).state is SchemaState.EMPTY
    Registry.open(registry_url).close()
    status = schema_status(engine)
    assert (status.state, status.current) == (SchemaState.CURRENT, head_revision())
    engine.dispose()


def test_models_match_the_newest_migration(registry_url: str) -> None:
    Registry.open(registry_url).close()
    engine = make_engine(registry_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == []


def test_concurrent_first_opens_both_succeed(registry_url: str) -> None:
    barrier = threading.Barrier(2)

    def open_close(_: int) -> str:
        barrier.wait()
        reg = Registry.open(registry_url)
        reg.close()
        return reg.url

    with ThreadPoolExecutor(2) as pool:
        assert len(list(pool.map(open_close, range(2)))) == 2
    engine = make_engine(registry_url)
    assert schema_status(engine).state is SchemaState.CURRENT
    engine.dispose()


def test_older_schema_is_refused_then_upgraded_with_data(registry_url: str) -> None:
    engine = make_engine(registry_url)
    upgrade_schema(engine, OLDEST)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO sweeps (id, name, backend, spec_text, spec_hash, created_at,"
                " updated_at) VALUES (1, 'old', 'embedded', 'x', 'h', :t, :t)"
            ),
            {"t": "2026-01-01 00:00:00"},
        )
        conn.execute(
            text(
                "INSERT INTO cells (sweep_id, cell_id, cell_index, axes, settings, labels, state,"
                " attempts_count, max_retries, created_at) VALUES (1, 'abcdefabcdef', 0, '{}',"
                " '{\"seed\": 1}', '{}', 'succeeded', 1, 0, :t)"
            ),
            {"t": "2026-01-01 00:00:00"},
        )
    with pytest.raises(UserInputError, match="older kappa") as info:
        Registry.open(registry_url)
    problem = info.value.problems[0]
    assert problem.fix is not None and problem.fix.startswith("kappa db upgrade --registry ")
    assert registry_url.split("@")[-1] in problem.fix
    assert OLDEST in (problem.found or "")

    before, after = upgrade_schema(engine)
    assert (before.current, after.current) == (OLDEST, head_revision())
    engine.dispose()
    with Registry.open(registry_url) as reg:
        cell = reg.get_cell("old", "abcdef")
        assert cell.settings == {"seed": 1} and cell.progress_updated_at is None
        assert reg.update_progress(cell, 1) is False  # succeeded: not running


def test_newer_schema_is_refused(registry_url: str) -> None:
    Registry.open(registry_url).close()
    engine = make_engine(registry_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    with pytest.raises(UserInputError, match="newer kappa"):
        Registry.open(registry_url)
    with pytest.raises(UserInputError, match="newer kappa"):
        upgrade_schema(engine)
    engine.dispose()


def test_foreign_database_is_refused(registry_url: str) -> None:
    engine = make_engine(registry_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE someone_elses (id INTEGER PRIMARY KEY)"))
    with pytest.raises(UserInputError, match="not a kappa registry"):
        Registry.open(registry_url)
    assert schema_status(engine).state is SchemaState.FOREIGN
    engine.dispose()


def test_unknown_target_revision_is_a_user_error(registry_url: str) -> None:
    engine = make_engine(registry_url)
    with pytest.raises(UserInputError, match="cannot migrate"):
        upgrade_schema(engine, "nope")
    engine.dispose()


def test_bad_urls_are_user_errors(tmp_path: object) -> None:
    with pytest.raises(UserInputError, match="unsupported registry database 'mysql'"):
        Registry.open("mysql://u@h/db")
    with pytest.raises(UserInputError, match="cannot parse"):
        Registry.open("::not a url::")
