"""The local MLflow server behind ``kappa ui``: where it may listen, and the server itself,
started as a child whose start-up chatter (:data:`NOISE`, :data:`QUIET_WARNINGS`) is held
back so as not to scroll away the URL, printed last, once the server answers. Its other
output (an error, a request's warning) still reaches stderr, masked like all kappa prints."""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from types import FrameType
from typing import IO

from orchestrator import paths
from orchestrator.errors import Problem, UserInputError
from orchestrator.limits import MAX_PORT
from orchestrator.redact import redact

HEALTH_POLL_S = 0.3
STARTUP_WAIT_S = 300  # past this the URL is printed anyway, with a note
REFUSED = "cannot start the MLflow UI there"
HOST_FIX = "e.g. --host 127.0.0.1 (the default), or 0.0.0.0 for every interface"

# Lines of the server's start-up and shut-down that say nothing the user needs (uvicorn's
# lifecycle for each worker, store URIs MLflow guessed, a note on its security middleware).
NOISE = re.compile(
    r"(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d )?INFO:"  # uvicorn's lifecycle, in MLflow's format
    r"|Registry store URI not provided"
    r"|Backend store URI not provided"
    r"|\[MLflow\] Security middleware enabled with default settings")
# Python warnings the server's imports raise (one per worker); later filters win, so a
# PYTHONWARNINGS of the user's is appended after these.
QUIET_WARNINGS = ("ignore::DeprecationWarning",
                  "ignore:starlette.middleware.wsgi is deprecated:UserWarning")


def check_address(host: str, port: int) -> None:
    """Refuse a port outside 1 .. 65535 (0: the printed URL would be wrong) and a host
    that is neither an IP address nor a host name, before the URL is printed."""
    problems = []
    if not 1 <= port <= MAX_PORT:
        problems.append(Problem("--port", "not a TCP port", found=str(port),
                                allowed=f"1 .. {MAX_PORT}", fix="e.g. --port 5000 (the default)"))
    label = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if len(host) > 253 or not re.fullmatch(rf"{label}(\.{label})*\.?", host):
            problems.append(Problem(
                "--host", "neither an IP address nor a host name", found=repr(host),
                allowed="an interface's address (127.0.0.1, 0.0.0.0, ::) or a host name "
                        "of letters, digits, '-' and '.'", fix=HOST_FIX))
    if problems:
        raise UserInputError(REFUSED, problems)


def check_store(uri: str) -> None:
    """Refuse a local store nothing has been tracked in yet (the server would make one)."""
    store = paths.local_store_path(uri)
    if store is not None and not store.exists():
        raise UserInputError(f"no MLflow store at {store} yet", [Problem(
            "mlflow", "nothing has been tracked there", found=redact(uri),
            fix="`kappa submit SPEC` creates it; or point KAPPA_HOME, KAPPA_MLFLOW_URI "
                "or --mlflow at an existing store")])


def check_port_free(host: str, port: int) -> None:
    """Refuse a port something already listens on (the URL would show that server, or
    nothing) and a host that is not an address of this machine, before the server
    starts. A port freed between this check and the server's start is the server's
    own error, which is shown."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError) as exc:
        raise UserInputError(REFUSED, [Problem(
            "--host", f"cannot be resolved ({exc})", found=repr(host), fix=HOST_FIX)]) from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                problem = Problem("--port", "already in use on this machine", found=str(port),
                                  fix=f"another port (e.g. --port {port + 1}), or stop what "
                                      "serves there (an earlier `kappa ui`?)")
            else:
                problem = Problem("--host", f"cannot listen there ({exc.strerror})",
                                  found=repr(host),
                                  fix="an address of this machine: --host 127.0.0.1 (the "
                                      "default), or 0.0.0.0 for every interface")
            raise UserInputError(REFUSED, [problem]) from None


def server_env(base: Mapping[str, str], uri: str) -> dict[str, str]:
    """The server's environment: the store (not on the command line, where ``ps`` would
    show its password), its registry store said explicitly (else MLflow says it guessed),
    a local store's artifact root, and the start-up warnings silenced. The user's own
    settings win."""
    env = {**base, "MLFLOW_BACKEND_STORE_URI": uri}
    env.setdefault("MLFLOW_REGISTRY_STORE_URI", uri)
    # Server-side jobs run GenAI judges and evaluations, never needed for training runs;
    # without them the server is one process instead of eight.
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    # One person's browser: one worker (each of uvicorn's default four imports MLflow).
    env.setdefault("MLFLOW_WORKERS", "1")
    if paths.local_store_path(uri) is not None:
        env["MLFLOW_DEFAULT_ARTIFACT_ROOT"] = paths.mlflow_artifact_root().resolve().as_uri()
    env["PYTHONWARNINGS"] = ",".join(
        [*QUIET_WARNINGS, *([base["PYTHONWARNINGS"]] if base.get("PYTHONWARNINGS") else [])])
    return env


def _die_with_parent() -> None:
    """In the child: receive SIGTERM when ``kappa ui`` dies, even by SIGKILL (Linux), so
    no server is left behind; MLflow's process passes it on to uvicorn."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class _Output:
    """Copies the server's output to stderr without its noise, holding it back until
    the URL has been printed (then what was held comes first)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.held: list[str] = []
        self.live = False
        self.muted = False
        self.lock = threading.Lock()

    def pump(self) -> None:
        """Read the server's output to its end (run in a thread)."""
        for raw in iter(self.stream.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            if NOISE.match(line) or self.muted:
                continue
            with self.lock:
                if self.live:
                    sys.stderr.write(line)
                    sys.stderr.flush()
                else:
                    self.held.append(line)

    def release(self) -> None:
        """Write what was held, then let the rest through as it comes."""
        with self.lock:
            sys.stderr.write("".join(self.held))
            sys.stderr.flush()
            self.held.clear()
            self.live = True


def _answers(health: str) -> bool:
    try:
        with urllib.request.urlopen(health, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


def serve(uri: str, host: str, port: int, health: str,
          announce: Callable[[bool], None]) -> int:
    """Run ``mlflow server`` on the store ``uri`` at ``host:port`` until it exits; call
    ``announce(up)`` once it answers at ``health`` (``up`` False: not after
    :data:`STARTUP_WAIT_S`, announced anyway). Ctrl-C, SIGTERM and SIGHUP stop it (with a
    SIGTERM). Its exit code (128 + N for signal N); a server that ends by itself before it
    answered has its output shown."""
    argv = [sys.executable, "-m", "mlflow", "server", "--host", host, "--port", str(port)]
    # Its own session: a terminal's Ctrl-C reaches it once, through kappa, rather than
    # once per process (uvicorn takes a second Ctrl-C as "quit now", with tracebacks).
    proc = subprocess.Popen(argv, env=server_env(os.environ, uri), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True,
                            preexec_fn=_die_with_parent)  # before any thread is started

    def stop(_signum: int, _frame: FrameType | None) -> None:
        output.muted = True  # what a stopping server says is not news
        if proc.poll() is None:  # SIGTERM: the one MLflow passes on to uvicorn, for any
            proc.terminate()

    assert proc.stdout is not None  # piped above
    output = _Output(proc.stdout)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    reader = threading.Thread(target=output.pump, name="mlflow-server-output", daemon=True)
    reader.start()
    deadline, up = time.monotonic() + STARTUP_WAIT_S, False
    while proc.poll() is None and not up and time.monotonic() < deadline:
        up = _answers(health)
        if not up:
            time.sleep(HEALTH_POLL_S)
    if proc.poll() is None:
        output.release()
        announce(up)
    proc.wait()
    reader.join(timeout=5)
    if not output.muted:  # a server that never answered: everything it said, after all
        output.release()
    code = proc.returncode
    return 128 - code if code < 0 else code
