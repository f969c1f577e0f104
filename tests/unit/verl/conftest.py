"""Fixtures of the verl backend tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from verl_test_cells import write_fake_verl


@pytest.fixture
def fake_verl(tmp_path: Path) -> Path:
    """An executable standing in for verl's ``python3`` (see kit.fake_verl)."""
    return write_fake_verl(tmp_path)


@pytest.fixture(scope="session")
def preflight_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A KAPPA_HOME for preflight tests, and one compose worker per test process.

    The worker imports verl (~20 s), so it lives for the session and is closed at its
    end: under ``pytest -n`` tests of one module interleave with others, and a
    module-scoped worker would be torn down and restarted between them.
    """
    import orchestrator.backends.verl.preflight as pf

    yield tmp_path_factory.mktemp("preflight_home")
    pf.close_worker()


@pytest.fixture
def preflight_home(preflight_session: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point this test's KAPPA_HOME at the session's preflight home (preflight switched on)."""
    monkeypatch.setenv("KAPPA_HOME", str(preflight_session))
    monkeypatch.delenv("KAPPA_CACHE", raising=False)
    monkeypatch.delenv("KAPPA_VERL_PREFLIGHT", raising=False)
    return preflight_session
