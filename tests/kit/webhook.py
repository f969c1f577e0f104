"""Local webhook endpoints for the notification tests: one that records every JSON POST
(and answers 200), one that accepts connections and never reads them, one that reads each
request and never answers."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Received:
    """The bodies an endpoint received, in order, and the paths they were posted to."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()

    def add(self, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.paths.append(path)
            self.bodies.append(body)

    def kinds(self) -> list[str]:
        """Each message's kind, from its text (``kappa: sweep ... ended``, ...)."""
        out = []
        for body in self.bodies:
            text = str(body.get("text", ""))
            out.append("sweep_end" if " ended: " in text and "sweep" in text
                       else "diverged" if " diverged" in text
                       else "canary_failed" if "a canary of" in text
                       else "cell_failed" if "failed for good" in text else "?")
        return out


@contextmanager
def recording_endpoint(answers: Sequence[int] = ()) -> Iterator[tuple[str, Received]]:
    """``(base URL, what it received)`` of a server that answers the first POSTs with the
    statuses ``answers``, then every POST with 200."""
    received = Received()
    statuses = list(answers)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            received.add(self.path, json.loads(self.rfile.read(length) or b"{}"))
            self.send_response(statuses.pop(0) if statuses else 200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_endpoint() -> Iterator[str]:
    """The base URL of a socket that accepts connections (the kernel's backlog does) and
    never reads or answers: a POST to it waits until its timeout."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@contextmanager
def hanging_endpoint() -> Iterator[tuple[str, list[bytes]]]:
    """``(base URL, the requests it read)`` of a server that accepts each connection, reads
    the whole request and never answers (the connection is held open until the end)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    requests: list[bytes] = []
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:  # closed: the test is over
                return
            held.append(conn)
            data = b""
            while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length and (chunk := conn.recv(65536)):
                body += chunk
            requests.append(body)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", requests
    finally:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        sock.close()
        for conn in held:
            conn.close()
