"""Which errors mean "the tracking store is away" (waited out) and which are its answer
(raised at once): judged by exception types and HTTP status codes, never by the words of a
message. Before, any error whose text held "503", "502" or "504" was waited on for up to
300 s: ``Run 'ab503f1c9e' not found`` too (about 2% of run ids hold one of them)."""

from __future__ import annotations

import errno
import random
import socket
import sqlite3
import urllib.error
from pathlib import Path

import pytest
import requests
from mlflow.exceptions import MlflowException, RestException
from mlflow.protos.databricks_pb2 import (
    RESOURCE_DOES_NOT_EXIST,
    TEMPORARILY_UNAVAILABLE,
)
from sqlalchemy.exc import OperationalError as SQLAlchemyOperationalError

from orchestrator.tracking.retry import is_unreachable, with_store_retries

SEED = 29


def _mlflow_wrapped(cause: BaseException) -> MlflowException:
    """What MLflow's REST client raises after its own retries: a bare MlflowException
    raised while handling the client's error (``raise MlflowException(...)``, no ``from``)."""
    try:
        raise cause
    except Exception as e:
        try:
            raise MlflowException(f"API request to http://store/api failed with exception {e}")
        except MlflowException as wrapped:
            return wrapped
    raise AssertionError


def _locked(tmp_path: Path) -> sqlite3.OperationalError:
    """A real "database is locked" from SQLite (SQLITE_BUSY)."""
    db = tmp_path / "store.db"
    holder = sqlite3.connect(db)
    holder.execute("CREATE TABLE IF NOT EXISTS t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        sqlite3.connect(db, timeout=0).execute("SELECT * FROM t")
    except sqlite3.OperationalError as exc:
        return exc
    finally:
        holder.rollback()
        holder.close()
    raise AssertionError("the table was not locked")


def test_the_stores_answers_are_not_waited_on_whatever_their_words() -> None:
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    ids = [f"{rng.randrange(16**10):010x}" for _ in range(2000)]
    ids = [i for i in ids if any(code in i for code in ("502", "503", "504"))] + ["ab503f1c9e"]
    assert len(ids) > 10
    for run_id in ids:
        missing = f"Run '{run_id}' not found"
        assert not is_unreachable(MlflowException(missing, RESOURCE_DOES_NOT_EXIST))
        assert not is_unreachable(RestException({"error_code": "RESOURCE_DOES_NOT_EXIST",
                                                 "message": missing}))
    for words in ("503 Service Unavailable", "connection refused", "database is locked",
                  "bad gateway 502", "timed out"):
        assert not is_unreachable(ValueError(words))  # words are not types
        assert not is_unreachable(RestException({"error_code": "INVALID_PARAMETER_VALUE",
                                                 "message": words}))
    assert not is_unreachable(urllib.error.HTTPError("http://s", 404, "Not Found", {}, None))
    assert not is_unreachable(sqlite3.OperationalError("no such table: runs"))


def test_an_unreachable_store_is_known_by_type_and_status(tmp_path: Path) -> None:
    response = requests.Response()
    response.status_code = 503
    away: list[BaseException] = [
        ConnectionRefusedError(errno.ECONNREFUSED, "refused"), TimeoutError("read"),
        socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
        OSError(errno.EHOSTUNREACH, "No route to host"),
        _mlflow_wrapped(requests.exceptions.ConnectionError("Max retries exceeded")),
        _mlflow_wrapped(requests.exceptions.RetryError("too many 503 error responses")),
        _mlflow_wrapped(requests.exceptions.ReadTimeout("read timed out")),
        requests.exceptions.HTTPError(response=response),
        MlflowException("SQLAlchemy database error", TEMPORARILY_UNAVAILABLE),
        RestException({"error_code": "503", "message": "upstream"}),  # a proxy's status
        RestException({"error_code": "TEMPORARILY_UNAVAILABLE", "message": "restarting"}),
        urllib.error.HTTPError("http://s", 502, "Bad Gateway", {}, None),
        urllib.error.URLError(ConnectionResetError(errno.ECONNRESET, "reset")),
        _locked(tmp_path),
        SQLAlchemyOperationalError("SELECT 1", {}, _locked(tmp_path)),
    ]
    for exc in away:
        assert is_unreachable(exc), repr(exc)


def test_a_missing_run_is_raised_at_once_not_waited_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_STORE_RETRY_SECONDS", "2")  # before: retried for all of it
    calls = []

    def missing() -> None:
        calls.append(1)
        raise RestException({"error_code": "RESOURCE_DOES_NOT_EXIST",
                             "message": "Run 'ab503f1c9e' not found"})

    with pytest.raises(RestException):
        with_store_retries(missing, "ending a run")
    assert len(calls) == 1
    # And a store that is away is waited on until it answers.
    answers = iter([_mlflow_wrapped(requests.exceptions.ConnectionError("refused")), None])

    def flaky() -> str:
        if (exc := next(answers)) is not None:
            raise exc
        return "done"

    monkeypatch.setattr("orchestrator.tracking.retry.time.sleep", lambda _s: None)
    assert with_store_retries(flaky, "ending a run") == "done"
