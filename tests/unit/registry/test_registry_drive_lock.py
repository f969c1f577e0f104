"""One scheduler per sweep across machines: two KAPPA_HOMEs (two "machines": their file
locks never meet) sharing one registry. On PostgreSQL the registry's advisory lock keeps
the second scheduler out; a SQLite registry is one machine's, where the file lock does."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.registry import Registry
from orchestrator.scheduler.lock import SweepLock, SweepLockedError


def test_a_second_machine_cannot_drive_a_sweep_the_first_drives(
    registry: Registry, registry_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "machine-a"))
    first = SweepLock("toy", registry.engine)
    first.acquire()
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "machine-b"))
    with Registry.open(registry_url) as other:
        second = SweepLock("toy", other.engine)
        if registry.engine.dialect.name == "postgresql":
            with pytest.raises(SweepLockedError, match="another machine"):
                second.acquire()
            assert second._fd is None  # the file lock it took is given back
        else:
            second.acquire()  # one machine's SQLite file: nothing to share
            second.release()
        first.release()
        second.acquire()  # free again once the first one let go
        second.release()
        with SweepLock("other-sweep", other.engine):
            pass  # other sweeps are other locks
