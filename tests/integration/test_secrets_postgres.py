"""A registry password never shows: not in ``ps``, not in logs, not in any kappa output.

A sweep runs on a real PostgreSQL registry whose URL carries a password (the test
server trusts every connection, so any password works). While its background scheduler
and cell jobs run, no process on the machine has the password on its command line;
afterwards nothing kappa printed or logged contains it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kit.cli import process
from kit.fake_backend import write_spec
from kit.home import seed_mlflow_store
from kit.kappa_main import KAPPA_SCRIPT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "registry"))
from kappa_pg_server import PgServer

SAFETY = 180  # seconds; a guard against hangs, not a speed assertion
SECRET = f"s3cret-{uuid.uuid4().hex[:10]}"

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # ~50 s: a server and a real sweep


def _kappa(*args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    return process(*args, code=0 if check else None, timeout=SAFETY, env=env)


def _command_lines_with(needle: bytes) -> list[str]:
    """Every process whose command line contains ``needle``."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:  # gone, or not ours to read
                continue
            if needle in cmdline:
                shown = cmdline.replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{proc.name}: {shown}")
    return found


def test_password_stays_off_command_lines_logs_and_output(
        pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    seed_mlflow_store(home)
    monkeypatch.setenv("KAPPA_HOME", str(home))
    monkeypatch.setenv("KAPPA_POLL_INTERVAL", "0.05")
    monkeypatch.setenv("KAPPA_CLI", f"{sys.executable} {KAPPA_SCRIPT}")
    url = pg_server.create_database().replace("://kappa@", f"://kappa:{SECRET}@")
    outputs: list[str] = []

    def kappa(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = _kappa(*args, "--registry", url, check=check)
        outputs.extend([proc.stdout, proc.stderr])
        return proc

    spec = write_spec(tmp_path / "s.yaml", "secret-bg", seeds=2, steps=2, hold_at=2)
    assert "background" in kappa("submit", str(spec)).stdout
    deadline = time.monotonic() + SAFETY
    while True:
        status = json.loads(kappa("status", "secret-bg", "--json").stdout)
        if status["scheduler_pid"] and all(c["progress_step"] == 1 for c in status["cells"]):
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    # Scheduler and both cell jobs are alive (parked at step 1): nobody's command line
    # holds the password, yet the scheduler has the URL (in its environment).
    pid = status["scheduler_pid"]
    assert _command_lines_with(SECRET.encode()) == []
    assert b"--registry" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert SECRET.encode() in Path(f"/proc/{pid}/environ").read_bytes()

    kappa("status")
    kappa("ui", "secret-bg", "--mlflow", f"http://ml:{SECRET}@127.0.0.1:9")  # prints, no server
    assert "#/experiments/" in outputs[-2]
    for cell in status["cells"]:
        (home / "runs" / "secret-bg" / cell["cell_id"] / "go").touch()
    while json.loads(kappa("status", "secret-bg", "--json").stdout)["counts"]["succeeded"] < 2:
        assert time.monotonic() < deadline
        time.sleep(0.2)

    bad = [("status", "--registry", f"postgresql://kappa:{SECRET}@127.0.0.1:1/x"),
           ("status", "--registry", f"postgresql://kappa:{SECRET}@127.0.0.1:notaport/x")]
    for args in bad:
        for full in ("0", "1"):
            proc = _kappa(*args, check=False, KAPPA_FULL_ERROR=full)
            assert proc.returncode == 2, proc.stderr
            outputs.extend([proc.stdout, proc.stderr])
    logs = [p.read_text(errors="replace") for p in home.rglob("*.log")]
    assert logs, "the scheduler and the cells wrote logs"
    leaks = [text for text in [*outputs, *logs] if SECRET in text]
    assert leaks == []
    assert any("kappa:***@127.0.0.1:1" in text for text in outputs)
