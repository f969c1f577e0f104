"""``kappa db`` for real: an old registry is refused (exit 2, with the fix), upgraded, used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kit.cli import run_kappa
from sqlalchemy import text

from orchestrator.registry import Registry, head_revision
from orchestrator.registry.engine import make_engine
from orchestrator.registry.schema import HEAD_REVISION, upgrade_schema


def kappa_process(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point (``python -m orchestrator``) in a new process."""
    env = {k: v for k, v in os.environ.items() if k != "KAPPA_REGISTRY"}
    env["KAPPA_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def old_registry(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    upgrade_schema(engine, "0001_initial")
    engine.dispose()
    return url


def test_old_registry_refused_then_upgraded(old_registry: str, tmp_path: Path) -> None:
    # One end-to-end run of the console entry point: exit 2, the fix, no traceback.
    refused = kappa_process("db", "check", "--registry", old_registry, home=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert f"kappa db upgrade --registry '{old_registry}'" in refused.stderr
    assert "Traceback" not in refused.stderr

    upgraded = kappa_process("db", "upgrade", "--registry", old_registry, home=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"0001_initial -> {head_revision()}" in upgraded.stdout
    with Registry.open(old_registry) as reg:
        assert reg.list_sweeps() == []


def test_db_commands_in_process(
    old_registry: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    code, out, _ = run_kappa(capsys, "db", "current", "--registry", old_registry)
    assert code == 0 and "0001_initial" in out and "outdated" in out
    code, _, err = run_kappa(capsys, "db", "check", "--registry", old_registry)
    assert code == 2 and "kappa db upgrade --registry" in err
    code, out, _ = run_kappa(capsys, "db", "upgrade", "--registry", old_registry)
    assert code == 0 and f"-> {HEAD_REVISION}" in out
    code, out, _ = run_kappa(capsys, "db", "upgrade", "--registry", old_registry)
    assert code == 0 and "already at revision" in out
    code, out, _ = run_kappa(capsys, "db", "check", "--registry", old_registry)
    assert code == 0 and out.strip().endswith(": ok")


def test_registry_from_environment_and_default_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "state"
    monkeypatch.setenv("KAPPA_HOME", str(home))
    monkeypatch.delenv("KAPPA_REGISTRY", raising=False)
    code, out, err = run_kappa(capsys, "db", "upgrade")
    assert code == 0, err
    assert "(empty) ->" in out
    assert (home / "registry.db").exists()
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("KAPPA_REGISTRY", f"sqlite:///{home / 'registry.db'}")
    code, out, _ = run_kappa(capsys, "db", "current")
    assert code == 0 and "up to date" in out


def test_newer_registry_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    url = f"sqlite:///{tmp_path / 'new.db'}"
    Registry.open(url).close()
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    engine.dispose()
    for command in ("check", "upgrade"):
        code, _, err = run_kappa(capsys, "db", command, "--registry", url)
        assert code == 2, (command, err)
        assert "newer kappa" in err
