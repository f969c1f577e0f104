"""The local MLflow store: made once under a lock, repaired after an interrupted
migration, switched to write-ahead logging."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from orchestrator.runs.atomic import lock_path
from orchestrator.tracking.sqlite_store import (
    mlflow_head_revision,
    prepare_store,
    repair_interrupted_migration,
    schema_revision,
    store_is_current,
    use_wal,
)


def test_use_wal_switches_a_database_once(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    sqlite3.connect(db).close()
    assert use_wal(db) and use_wal(db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_use_wal_leaves_a_non_database_alone(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all, just bytes" * 10)
    assert not use_wal(junk)
    assert junk.read_bytes().startswith(b"not a database")


# -- creating and migrating the store once, across processes ------------------------------
def _table_names(db: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_repair_drops_a_copy_whose_original_exists_and_renames_an_orphan(
        tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.executescript(
            "CREATE TABLE metrics (k TEXT); INSERT INTO metrics VALUES ('kept');"
            "CREATE TABLE _alembic_tmp_metrics (k TEXT);"  # interrupted before the drop
            "CREATE TABLE _alembic_tmp_tags (k TEXT); INSERT INTO _alembic_tmp_tags "
            "VALUES ('moved');")  # interrupted after the drop, before the rename
    assert repair_interrupted_migration(db) == ["_alembic_tmp_metrics", "_alembic_tmp_tags"]
    assert _table_names(db) == {"metrics", "tags"}
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT k FROM metrics").fetchall() == [("kept",)]
        assert conn.execute("SELECT k FROM tags").fetchall() == [("moved",)]
    assert repair_interrupted_migration(db) == []


def test_prepare_store_creates_under_the_lock_then_never_takes_it_again(
        tmp_path: Path) -> None:
    db = tmp_path / "store" / "mlflow.db"
    head = mlflow_head_revision()
    assert head is not None
    seen: list[bool] = []

    def create() -> None:
        # Under the lock: nobody else may take it now.
        fd = os.open(lock_path(db), os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        # What MLflow does to an empty store, in short: the schema, stamped at its head.
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.executescript("CREATE TABLE alembic_version (version_num TEXT);"
                               f"INSERT INTO alembic_version VALUES ('{head}');")
            conn.commit()
        seen.append(True)

    assert prepare_store(db, create) and seen == [True]
    assert store_is_current(db, head) and schema_revision(db) == head

    # A current store: no lock, no call. Hold the lock elsewhere to prove it.
    fd = os.open(lock_path(db), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        done = threading.Event()
        worker = threading.Thread(
            target=lambda: done.set() if not prepare_store(db, create) else None)
        worker.start()
        worker.join(60)  # a guard: a lock wait would hang here
        assert done.is_set()
    finally:
        os.close(fd)
    assert seen == [True]
    # The head noted by another MLflow version is not trusted: worked out again, kept.
    lock_path(db).write_text("mlflow 0.0.1 not-a-revision\n")
    assert not prepare_store(db, create) and seen == [True]
    assert lock_path(db).read_text().split()[2] == head


def test_prepare_store_repairs_a_store_left_broken_by_an_interrupted_migration(
        tmp_path: Path) -> None:
    """The issue's "mlflow.db stays broken for every later command": a store stamped at an
    older revision with ``_alembic_tmp_*`` copies left by processes that died (or failed)
    inside a batch operation. MLflow alone then fails on every open ("table
    _alembic_tmp_latest_metrics already exists"); under the lock the leftovers are removed
    and the migration finishes."""
    from alembic import command
    from mlflow import MlflowClient
    from mlflow.store.db.utils import (
        InitialBase,
        _get_alembic_config,
        create_sqlalchemy_engine,
    )

    db = tmp_path / "mlflow.db"
    url = f"sqlite:///{db}"
    engine = create_sqlalchemy_engine(url)
    InitialBase.metadata.create_all(engine)
    config = _get_alembic_config(url)
    with engine.begin() as conn:  # where a broken store of the report stood
        config.attributes["connection"] = conn
        command.upgrade(config, "a8c4a736bde6")
    engine.dispose()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.executescript(
            "CREATE TABLE _alembic_tmp_latest_metrics AS SELECT * FROM latest_metrics;"
            "CREATE TABLE _alembic_tmp_metrics AS SELECT * FROM metrics;")
    assert prepare_store(db, lambda: MlflowClient(url).search_experiments(max_results=1))
    assert store_is_current(db, mlflow_head_revision())
    assert not any(t.startswith("_alembic_tmp_") for t in _table_names(db))
    client = MlflowClient(url)
    run = client.create_run(client.create_experiment("after-repair"))
    client.log_metric(run.info.run_id, "m", 1.0)
    assert client.get_run(run.info.run_id).data.metrics == {"m": 1.0}


def test_a_file_that_is_no_store_stops_submit_before_anything_is_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from kit.cli import run_kappa
    from kit.tiny_spec import tiny_embedded

    from orchestrator.registry import Registry

    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "mlflow.db").write_text("my notes, in the store's place\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(tiny_embedded("no-store", {"seed": [0]}, max_steps=1))
    ran = run_kappa(capsys, "submit", str(spec), "--wait")
    assert ran.code == 2 and "Traceback" not in ran.output, ran.output
    assert f"{tmp_path / 'home' / 'mlflow.db'} is not an MLflow store" in ran.output
    assert "move the file away" in ran.output
    with Registry.open() as reg:
        assert reg.find_sweep("no-store") is None
    assert (tmp_path / "home" / "mlflow.db").read_text().startswith("my notes")
