"""A damaged SQLite registry (a disk error, a copy taken while kappa wrote to it, SQLite on
a network file system, another file in its place) is an error naming the file and the fix,
exit 2, never a traceback; ``kappa db check`` reads all of it and says whether it is sound."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from kit.cells import make_cells
from kit.cli import run_kappa

from orchestrator.grid.plan import SweepPlan
from orchestrator.registry import CellState, Registry


def _filled(path: Path) -> bytes:
    """A registry with two sweeps of finished and running cells; its bytes."""
    with Registry.open(f"sqlite:///{path}") as reg:
        for name in ("toy", "other"):
            reg.upsert_sweep(name, backend="embedded", spec_text=f"name: {name}\n",
                             plan=SweepPlan(name=name, backend="embedded").to_json())
            cells = reg.add_cells(name, make_cells(6), max_retries=1)
            for i, cell in enumerate(cells):
                reg.transition(cell, CellState.PENDING, CellState.QUEUED)
                reg.transition(cell, CellState.QUEUED, CellState.RUNNING)
                if i % 2:
                    reg.finish_attempt(cell, CellState.SUCCEEDED, exit_code=0,
                                       final_metrics={"val-core/x/acc/mean@1": i / 10},
                                       last_error=None)
    return path.read_bytes()


def test_a_file_that_is_no_database_is_named_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    (tmp_path / "registry.db").write_text("these are my notes, not a database\n")
    for args in (("status",), ("db", "check"), ("submit", "no-such.yaml")):
        ran = run_kappa(capsys, *args)
        assert ran.code == 2 and "Traceback" not in ran.output, ran.output
        if args != ("submit", "no-such.yaml"):  # the spec is read first
            assert f"cannot read the registry {tmp_path / 'registry.db'}" in ran.output
            assert "move it aside" in ran.output


@pytest.mark.parametrize("seed", range(12))
def test_random_damage_is_an_error_or_nothing_never_a_traceback(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(seed)
    print(f"seed={seed}")
    path = tmp_path / "registry.db"
    data = bytearray(_filled(path))
    for _ in range(rng.choice([1, 5, 50, 500])):
        data[rng.randrange(len(data))] = rng.randrange(256)
    path.write_bytes(bytes(data))
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    codes = {}
    for args in (("status",), ("status", "toy"), ("status", "toy", "--json"), ("db", "check")):
        ran = run_kappa(capsys, *args)
        assert ran.code in (0, 2) and "Traceback" not in ran.output, (args, ran.output)
        codes[args] = ran.code
    # Whatever a command could not read, the check finds too.
    assert codes[("db", "check")] == 2 or set(codes.values()) == {0}, codes


def test_a_full_disk_is_an_error_saying_so_and_nothing_half_written(tmp_path: Path) -> None:
    """SQLite says "database or disk is full" when a write finds no room (here: a page
    limit, which fails the same way a full disk does)."""
    from sqlalchemy import event

    from orchestrator.errors import UserInputError

    path = tmp_path / "registry.db"
    _filled(path)
    with Registry.open(f"sqlite:///{path}") as reg:
        with reg.engine.connect() as connection:
            pages = connection.exec_driver_sql("PRAGMA page_count").scalar()
        event.listen(reg.engine, "connect", lambda dbapi, _record: dbapi.execute(
            f"PRAGMA max_page_count = {pages}"))
        reg.engine.dispose()  # new connections, with the limit
        before = len(reg.cells("toy"))
        with pytest.raises(UserInputError) as caught:
            reg.add_cells("toy", make_cells(400, prefix="f"), max_retries=1)
        text = caught.value.render()
        assert f"the disk of the registry {path} is full" in text and "kappa resume" in text
        assert len(reg.cells("toy")) == before  # the transaction left nothing behind
