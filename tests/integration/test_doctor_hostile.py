"""``kappa doctor`` against a hostile setup: servers that accept and never answer,
passwords in every URL, checks that crash or hang, absurd options (issue 11, 3).

What must hold in every case: the doctor ends (every request and probe is bounded, and
says so), exits 0 or 2 with no traceback, prints no password (human or ``--json``),
``--json`` is strict JSON, and nothing is created (KAPPA_HOME, registry, MLflow store).
"""

from __future__ import annotations

import base64
import http.server
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_doctor import doctor, tree

from orchestrator.doctor import CheckResult, DoctorOptions, Status
from orchestrator.doctor.run import run_checks

PASSWORD = "s3cr3t-Pw"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A KAPPA_HOME that does not exist (the doctor must not make it), no store settings."""
    folder = tmp_path / "home"
    monkeypatch.setenv("KAPPA_HOME", str(folder))
    for var in ("KAPPA_REGISTRY", "KAPPA_MLFLOW_URI", "RAY_ADDRESS", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return folder


def strict_json(out: str) -> dict[str, Any]:
    """``out``'s JSON report, refusing NaN/Infinity (not JSON, though Python writes them)."""
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    report: dict[str, Any] = json.loads(out[out.index("{"):], parse_constant=refuse)
    return report


@pytest.fixture
def blackhole() -> Iterator[int]:
    """A port whose server accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize(("as_json", "mlflow"), [(False, "http"), (True, "postgresql")],
                         ids=["human-http-mlflow", "json-postgresql-mlflow"])
def test_servers_that_never_answer_are_bounded_problems_without_passwords(
        home: Path, blackhole: int, capsys: pytest.CaptureFixture[str], as_json: bool,
        mlflow: str) -> None:
    """MLflow (a server, or a PostgreSQL store: MLflow itself retries for a minute), a
    PostgreSQL registry and a Ray dashboard that accept and never answer: each is a
    problem that says how long it waited; no password, nothing created."""
    target = f"u:{PASSWORD}@127.0.0.1:{blackhole}"
    code, out = doctor(capsys, *(["--json"] if as_json else []), "--timeout", "2",
                       "--check", "mlflow", "--check", "registry", "--check", "ray",
                       "--mlflow", f"{mlflow}://{target}/db", "--registry",
                       f"postgresql://{target}/reg", "--ray-address", f"http://{target}")
    assert code == 2, out
    assert PASSWORD not in out and "Traceback" not in out, out
    if as_json:
        checks = {c["name"]: c for c in strict_json(out)["checks"]}
        assert {n: c["status"] for n, c in checks.items()} == dict.fromkeys(
            ("mlflow", "registry", "ray"), "problem"), checks
        for check in checks.values():
            assert "no answer within 2 s" in check["summary"], check
    else:
        assert out.count("answer within 2 s") >= 3, out  # the table may wrap "no"
    assert not home.exists(), tree(home)


def test_a_ray_address_without_scheme_keeps_its_password_masked(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = doctor(capsys, "--json", "--check", "ray", "--timeout", "2",
                       "--ray-address", f"u:{PASSWORD}@127.0.0.1:1")
    assert code == 2 and PASSWORD not in out, out
    assert strict_json(out)["checks"][0]["status"] == "problem"


def test_a_check_that_crashes_or_hangs_still_gives_a_json_report(
        home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A check raising SystemExit, one returning NaN and a password in its details, and
    one that never returns: strict JSON, each a problem (or masked), exit 2."""
    from orchestrator.doctor import environment
    from orchestrator.doctor import run as doctor_run

    release = threading.Event()

    def exits(options: DoctorOptions) -> CheckResult:
        sys.exit(3)

    def nan_and_password(options: DoctorOptions) -> CheckResult:
        return CheckResult("disk", Status.OK, f"postgresql://u:{PASSWORD}@db/x",
                           details={"free": float("nan"), "url": f"http://u:{PASSWORD}@h",
                                    "nested": [float("inf"), {"k": Path("/x")}]})

    def hangs(options: DoctorOptions) -> CheckResult:
        release.wait()
        raise AssertionError("released")

    monkeypatch.setattr(environment, "check_python", exits)
    monkeypatch.setattr(environment, "check_disk", nan_and_password)
    monkeypatch.setattr(environment, "check_gpus", hangs)
    monkeypatch.setattr(doctor_run, "CHECK_GRACE_S", 0.5)
    try:
        code, out = doctor(capsys, "--json", "--timeout", "0.5", "--check", "python",
                           "--check", "disk", "--check", "gpus")
    finally:
        release.set()
    assert code == 2, out
    assert PASSWORD not in out and "Traceback" not in out, out
    checks = {c["name"]: c for c in strict_json(out)["checks"]}
    assert checks["python"]["status"] == "problem" and "SystemExit" in \
        checks["python"]["summary"], checks
    assert checks["gpus"]["status"] == "problem" and "abandoned" in \
        checks["gpus"]["summary"], checks
    assert checks["disk"]["details"]["free"] == "nan", checks


def test_a_python_that_hangs_is_stopped_with_its_children(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--python a script whose child holds the output pipe and sleeps: a bounded
    problem, and the child is killed too (not left holding the pipe)."""
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\nsleep 600 &\necho $! > {pid_file}\nsleep 600\n")
    script.chmod(0o755)
    code, out = doctor(capsys, "--check", "plugin", "--python", str(script),
                       "--timeout", "1")
    assert code == 2, out
    assert "no answer within 1 s" in out and "Traceback" not in out, out
    child = int(pid_file.read_text())
    status = Path(f"/proc/{child}/status")

    def gone() -> bool:
        try:
            return "State:\tZ" in status.read_text()
        except FileNotFoundError:
            return True

    # Killed (and reaped by init, or a zombie until it is): never still sleeping. A process
    # SIGKILLed while the CPUs are busy may show as running for a moment on its way out
    # (seen under load): the kill is asynchronous, the check waits for it, boundedly.
    deadline = time.monotonic() + 20
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(), status.read_text()


@pytest.mark.parametrize("python", ["not-python-file", "a-folder", "/bin/true",
                                    "/nonexistent/python3"])
def test_a_python_that_is_no_python_is_a_problem(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], python: str) -> None:
    (tmp_path / "not-python-file").write_text("hello")
    (tmp_path / "a-folder").mkdir()
    code, out = doctor(capsys, "--json", "--check", "plugin", "--timeout", "20",
                       "--python", str(tmp_path / python) if "/" not in python else python)
    assert code == 2, out
    plugin = strict_json(out)["checks"][0]
    assert plugin["status"] == "problem" and plugin["fix"], plugin


@pytest.mark.parametrize("args", [["--min-free-gib", "-1"], ["--min-free-gib", "nan"],
                                  ["--min-free-gib", "inf"], ["--timeout", "-inf"],
                                  ["--timeout", "inf"], ["--timeout", "1e39"],
                                  ["--timeout", "nan"], ["--timeout", "-1"],
                                  ["--timeout", "0"], ["--timeout", "86401"]])
def test_absurd_numbers_are_refused(home: Path, capsys: pytest.CaptureFixture[str],
                                    args: list[str]) -> None:
    code, out = doctor(capsys, "--check", "disk", *args)
    assert code == 2 and "Traceback" not in out, out
    assert args[0] in out and "allowed:" in out, out


def test_a_huge_minimum_is_a_warning(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = doctor(capsys, "--json", "--check", "disk", "--min-free-gib", "1e308")
    assert code == 0, out
    assert strict_json(out)["checks"][0]["status"] == "warning"


@pytest.mark.parametrize("where", ["file", "file/under/it"])
def test_a_checkpoint_dir_that_is_a_file_is_a_problem(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    (tmp_path / "file").write_text("x")
    code, out = doctor(capsys, "--json", "--check", "disk", "--min-free-gib", "0",
                       "--checkpoint-dir", str(tmp_path / where))
    assert code == 2, out
    disk = strict_json(out)["checks"][0]
    assert disk["status"] == "problem" and "is a file, not a folder" in disk["summary"], disk


def test_mlflow_credentials_in_the_url_are_sent_as_basic_auth() -> None:
    """urllib would read ``user:password@host`` as the host name; the health probe sends
    them the way MLflow's client does, and a server that checks them is reachable."""
    from orchestrator.doctor.stores import _server_answers

    seen: list[str | None] = []

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            expected = "Basic " + base64.b64encode(f"u@x:{PASSWORD}".encode()).decode()
            self.send_response(200 if self.headers.get("Authorization") == expected else 500)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        assert _server_answers(f"http://u%40x:{PASSWORD}@127.0.0.1:{port}/", 5.0) is None
        assert "HTTP 500" in (_server_answers(f"http://127.0.0.1:{port}", 5.0) or "")
    finally:
        server.shutdown()
        server.server_close()
    assert seen[0] is not None and seen[1] is None


def test_run_checks_refuses_non_finite_options() -> None:
    from orchestrator.errors import UserInputError

    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(UserInputError):
            DoctorOptions(min_free_gib=bad)
        with pytest.raises(UserInputError):
            run_checks(DoctorOptions(timeout_s=bad), ["disk"])
    # A timeout past a C time_t overflowed the probe's waits; one of 0 fails every probe.
    for bad in (1e39, 0.0):
        with pytest.raises(UserInputError, match="--timeout"):
            DoctorOptions(timeout_s=bad)
