"""Adaptive search on a PostgreSQL registry: Optuna's studies in the schema
``kappa_optuna`` of the registry's database, the registry's own tables untouched
(a real throwaway server, tests/unit/registry/kappa_pg_server.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.cli import run_kappa
from kit.fake_backend import SEARCH_METRIC, search_spec
from kit.home import register_backends, seed_mlflow_store
from kit.kappa_main import KAPPA_SCRIPT

from orchestrator.registry import CellState, Registry
from orchestrator.search.hook import OPTUNA_SCHEMA

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "registry"))
from kappa_pg_server import PgServer

pytestmark = pytest.mark.postgres
SPACE = f"""  space:
    x: {{uniform: [0.0, 1.0]}}
    shape: {{categorical: [a, b]}}
  objective: {{metric: {SEARCH_METRIC}, direction: maximize}}
"""


@pytest.fixture
def pg_home(pg_server: PgServer, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A KAPPA_HOME whose registry is a fresh PostgreSQL database."""
    home = tmp_path / "home"
    seed_mlflow_store(home)
    url = pg_server.create_database()
    monkeypatch.setenv("KAPPA_HOME", str(home))
    monkeypatch.setenv("KAPPA_REGISTRY", url)
    monkeypatch.setenv("KAPPA_POLL_INTERVAL", "0.05")
    register_backends(monkeypatch)
    try:
        yield home, url
    finally:
        pg_server.drop_database(url)


def _tables(url: str) -> dict[str, set[str]]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(
                "select table_schema, table_name from information_schema.tables "
                "where table_schema not in ('pg_catalog', 'information_schema')")).all()
            revision = conn.execute(text("select version_num from public.alembic_version")
                                    ).scalar_one()
    finally:
        engine.dispose()
    out: dict[str, set[str]] = {"revision": {revision}}
    for schema, name in rows:
        out.setdefault(schema, set()).add(name)
    return out


def test_a_search_on_postgres_keeps_optuna_in_its_own_schema(
        pg_home: tuple[Path, str], pg_server: PgServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    home, url = pg_home
    # What the registry alone creates, on a database of its own: the reference.
    reference_url = pg_server.create_database()
    try:
        Registry.open(reference_url).close()
        reference = _tables(reference_url)
    finally:
        pg_server.drop_database(reference_url)
    spec = search_spec(home.parent / "s.yaml", "pgsearch", SPACE + "  trials: 3\n"
                       "  parallel: 2\n  seed: 0\n", steps=3)
    ran = run_kappa(capsys, "search", str(spec), "--wait")
    assert ran.code == 0, ran.output
    tables = _tables(url)
    assert {"studies", "trials", "trial_params", "trial_values",
            "alembic_version"} <= tables[OPTUNA_SCHEMA]
    assert tables["public"] == reference["public"]  # no Optuna table among the registry's
    assert tables["revision"] == reference["revision"]  # its migration stamp untouched
    import optuna

    from orchestrator.search.hook import open_storage

    with Registry.open() as reg:
        cells = reg.cells("pgsearch")
        study = optuna.load_study(study_name="pgsearch", storage=open_storage(reg.engine))
    trials = study.get_trials(deepcopy=False)
    assert sorted(t.number for t in trials) == [0, 1, 2]
    assert all(t.state.name == "COMPLETE" for t in trials)
    assert sorted(c.labels["kappa.trial"] for c in cells) == [0, 1, 2]
    assert all(c.state is CellState.SUCCEEDED for c in cells)


def test_two_machines_share_one_study_through_a_postgres_registry(
        pg_home: tuple[Path, str], tmp_path: Path) -> None:
    """Two `kappa search --wait` processes with their own KAPPA_HOME (two machines) and
    one PostgreSQL registry on one study: no trial is asked twice, every trial has
    exactly one cell, and the study ends with its whole budget done. One scheduler per
    sweep across machines (the registry lease, orchestrator/scheduler/lease.py):
    one drives every trial, the other waits for the end and reports the same study."""
    import os
    import subprocess

    import optuna

    from orchestrator.search.hook import open_storage

    home, _url = pg_home
    other = tmp_path / "other-home"
    seed_mlflow_store(other)
    spec = search_spec(tmp_path / "s.yaml", "shared", SPACE + "  trials: 8\n  parallel: 2\n"
                       "  sampler: random\n  seed: 0\n", steps=6, step_seconds=0.05)
    procs = [subprocess.Popen([sys.executable, str(KAPPA_SCRIPT), "search", str(spec),
                               "--wait"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "KAPPA_HOME": str(h)})
             for h in (home, other)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    with Registry.open() as reg:
        cells = reg.cells("shared")
        study = optuna.load_study(study_name="shared", storage=open_storage(reg.engine))
    trials = study.get_trials(deepcopy=False)
    assert sorted(t.number for t in trials) == list(range(8)), trials
    assert all(t.state.name == "COMPLETE" for t in trials), trials
    numbers = sorted(c.labels["kappa.trial"] for c in cells)
    assert numbers == list(range(8)), numbers  # exactly one cell per trial
    assert all(c.state is CellState.SUCCEEDED for c in cells)
    # Every trial ran on one machine: the two never drove the sweep at once.
    assert len({Path(c.run_dir or "").parents[2] for c in cells}) == 1
    assert all("shared: 8/8 trials — 8 done" in out for out in outputs), outputs
