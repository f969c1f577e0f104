"""A throwaway PostgreSQL server for tests: ``initdb`` + ``pg_ctl`` in a temp folder.

PostgreSQL refuses to run as root, so when the tests run as root the server runs as the
``postgres`` system user (through ``runuser``). It listens on 127.0.0.1 on a free port
with trust authentication and ``fsync`` off (throwaway data).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

SERVER_USER = "postgres"
DB_USER = "kappa"


def find_bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (PATH first, then Debian's layout)."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(os.path.realpath(on_path)).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
    )
    for folder in reversed(candidates):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


def unavailable_reason() -> str | None:
    """Why a server cannot be started here, or ``None`` if it can."""
    if find_bin_dir() is None:
        return "PostgreSQL server binaries (initdb/pg_ctl) not found; `make sysdeps` installs them"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg (3) is not installed; pip install 'psycopg[binary]'"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no '{SERVER_USER}' user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root and `runuser` is missing"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgServer:
    """One running server; :meth:`create_database` gives each test its own database."""

    def __init__(self) -> None:
        bin_dir = find_bin_dir()
        assert bin_dir is not None
        self.bin_dir = bin_dir
        self.base = Path(tempfile.mkdtemp(prefix="kappa-pg-"))
        self.base.chmod(0o755)
        self.data = self.base / "data"
        self.port = _free_port()
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SERVER_USER)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
            self._as_user = ["runuser", "-u", SERVER_USER, "--"]

    def _run(self, *argv: str) -> None:
        result = subprocess.run(
            [*self._as_user, *argv], capture_output=True, text=True, check=False, timeout=120
        )
        if result.returncode != 0:
            log = self.base / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{argv[0]} failed: {result.stderr}\n{result.stdout}\n{tail}")

    def start(self) -> PgServer:
        """initdb + start; returns self."""
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            DB_USER,
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        )
        self.start_again()
        return self

    def halt(self) -> None:
        """Stop the server at once, as a crash would, keeping its data (:meth:`start_again`)."""
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                  "stop")

    def start_again(self) -> None:
        """Start the server (again, after :meth:`halt`) on its port and data."""
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                   f"-c unix_socket_directories={self.base} -c fsync=off "
                   "-c full_page_writes=off -c synchronous_commit=off")
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-l",
                  str(self.base / "server.log"), "-o", options, "-w", "-t", "60", "start")

    def stop(self) -> None:
        """Stop the server and delete its data."""
        try:
            self._run(
                str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"
            )
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=DB_USER, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(sql.encode())

    def create_database(self) -> str:
        """A fresh, empty database; its SQLAlchemy URL."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self._admin(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://{DB_USER}@127.0.0.1:{self.port}/{name}"

    def drop_database(self, url: str) -> None:
        """Drop a database made by :meth:`create_database` (connections are cut)."""
        name = url.rsplit("/", 1)[1]
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
