"""Doctor checks of the stores: the MLflow tracking URI and the run registry. Nothing is created
or written: a missing local store is reported with whether its folder is writable; an existing
local MLflow store's schema is compared with the installed MLflow's and its files' permissions
checked; a server or database store is read."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.doctor import CheckResult, DoctorOptions, Status
from orchestrator.doctor.environment import nearest_existing
from orchestrator.errors import UserInputError
from orchestrator.redact import redact


def _missing_local(name: str, where: str) -> CheckResult:
    """A local store not made yet: fine if its folder can be made and written."""
    folder = nearest_existing(Path(where).parent)
    if not os.access(folder, os.W_OK | os.X_OK):
        return CheckResult(name, Status.PROBLEM, f"{where} does not exist and {folder} is "
                           "not writable", fix="set KAPPA_HOME to a writable folder",
                           details={"path": where})
    return CheckResult(name, Status.OK, f"{where} does not exist yet (the first `kappa "
                       "submit` creates it; its folder is writable)", details={"path": where})


@contextmanager
def _fail_fast_http(timeout_s: float) -> Iterator[None]:
    """MLflow's HTTP client retries for minutes by default; the doctor asks once."""
    fast = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
            "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, round(timeout_s)))}
    saved = {k: os.environ[k] for k in fast if k in os.environ}
    os.environ.update(fast)
    try:
        yield
    finally:
        for key in fast:
            os.environ.pop(key, None)
        os.environ.update(saved)


def _health_request(uri: str) -> urllib.request.Request:
    """A GET of ``uri``'s ``/health``, credentials in the URL sent as Basic auth (as
    MLflow's client does; urllib would read ``user:password@host`` as the host)."""
    import base64
    from urllib.parse import unquote, urlsplit

    from orchestrator.tracking.ui import without_credentials

    url = uri.rstrip("/") + "/health"
    parts = urlsplit(url)
    headers = {}
    if parts.username is not None or parts.password is not None:
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    return urllib.request.Request(without_credentials(url), headers=headers)


def _server_answers(uri: str, timeout_s: float) -> str | None:
    """``None`` if the tracking server at ``uri`` answers ``/health``, else why not."""
    try:
        with urllib.request.urlopen(_health_request(uri), timeout=timeout_s):
            return None
    except urllib.error.HTTPError as exc:
        # It answered: an auth proxy (401/403) or an old server without /health (404);
        # the write probe below tells whether it works.
        return None if exc.code in (401, 403, 404) else f"HTTP {exc.code} from /health"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError) or isinstance(exc, TimeoutError):
            return f"no answer within {timeout_s:g} s"
        return str(reason)


def _bounded_db_url(url: Any, timeout_s: float) -> Any:
    """``url`` (SQLAlchemy) with a connect timeout if the user gave none: libpq waits
    minutes for a server that accepts and never answers."""
    if url.get_backend_name() == "postgresql" and "connect_timeout" not in url.query:
        # libpq takes whole seconds, at least 2.
        return url.update_query_dict({"connect_timeout": str(max(2, round(timeout_s)))})
    return url


def _database_answers(uri: str, timeout_s: float) -> str | None:
    """``None`` if the database at ``uri`` takes a connection (bounded), else why not."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    try:
        url = _bounded_db_url(make_url(uri), timeout_s)
        engine = create_engine(url)
    except Exception as exc:  # a bad URL or a missing driver: MLflow would fail too
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    try:
        with engine.connect():
            return None
    except Exception as exc:
        return _connect_failure(exc, url)
    finally:
        engine.dispose()


def _connect_failure(exc: Exception, url: Any) -> str:
    """The first line of why a connection to ``url`` failed (a timeout says how long)."""
    first = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]
    return first + (f" (no answer within {url.query.get('connect_timeout')} s)"
                    if "timeout expired" in first else "")


def check_mlflow(options: DoctorOptions) -> CheckResult:
    """The tracking store answers (a read) and, if local, is at the installed MLflow's
    schema and writable (its files' permissions); nothing is written."""
    uri = paths.mlflow_uri(options.mlflow)
    shown = redact(uri)
    local = paths.local_store_path(uri)
    if local is not None and not local.exists():
        return _missing_local("mlflow", str(local))
    if local is not None and uri.startswith("sqlite:"):
        return _check_local_sqlite(local, shown)
    fix_server = ("start the tracking server, or point --mlflow / KAPPA_MLFLOW_URI at a "
                  "reachable one (`mlflow server --host 0.0.0.0 --port 5000`)")
    why = None
    if uri.startswith(("http://", "https://")):
        why = _server_answers(uri, options.network_timeout_s)
        what, fix = "tracking server", fix_server
    elif local is None and "://" in uri and not uri.startswith(("file:", "sqlite:")):
        # A database store: MLflow retries its connection for a minute or more.
        why = _database_answers(uri, options.network_timeout_s)
        what, fix = "tracking store", ("check the database server is up and the URI's host, "
                                       "port, user and password")
    if why is not None:
        return CheckResult("mlflow", Status.PROBLEM, f"{what} {shown} is unreachable: "
                           f"{redact(why)}", fix=fix, details={"uri": shown})
    try:
        from mlflow import MlflowClient

        from orchestrator.tracking import absolute_uri

        with _fail_fast_http(options.network_timeout_s):
            MlflowClient(tracking_uri=absolute_uri(uri)).search_experiments(max_results=1)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return CheckResult("mlflow", Status.PROBLEM, f"cannot read {shown}: "
                           f"{redact(first)[:300]}", fix=fix_server if local is None else
                           "check the store's file permissions, or run `mlflow db upgrade "
                           f"{shown}` if MLflow says its schema is old", details={"uri": shown})
    return CheckResult("mlflow", Status.OK, f"{shown}: reachable (read only: nothing was "
                       "written)", details={"uri": shown})


def _check_local_sqlite(db: Path, shown: str) -> CheckResult:
    """A local SQLite store: at the installed MLflow's schema revision, and its file, its
    folder (SQLite's write-ahead log) and the artifact folder writable."""
    from orchestrator.tracking import sqlite_store as store

    details = {"uri": shown, "revision": store.schema_revision(db),
               "head": store.newest_revision(db)}
    if details["revision"] is None:
        return CheckResult("mlflow", Status.PROBLEM, f"{db} is not an MLflow store",
                           fix=store.NOT_A_STORE_FIX, details=details)
    if details["head"] is not None and details["revision"] != details["head"]:
        return CheckResult("mlflow", Status.PROBLEM, f"{shown} is at schema revision "
                           f"{details['revision']}, not the installed MLflow's "
                           f"{details['head']}", fix=f"`mlflow db upgrade {shown}` (a store "
                           "made by a newer MLflow: upgrade MLflow)", details=details)
    artifacts = nearest_existing(paths.mlflow_artifact_root())
    blocked = [str(p) for p, mode in ((db, os.W_OK), (db.parent, os.W_OK | os.X_OK),
                                      (artifacts, os.W_OK | os.X_OK))
               if not os.access(p, mode)]
    if blocked:
        return CheckResult("mlflow", Status.PROBLEM, f"{shown}: not writable: "
                           f"{', '.join(blocked)}", fix="check the store's file permissions "
                           "(or set KAPPA_HOME to a folder of yours)", details=details)
    return CheckResult("mlflow", Status.OK, f"{shown}: at schema revision "
                       f"{details['revision']} (current) and writable (nothing was written)",
                       details=details)


def check_registry(options: DoctorOptions) -> CheckResult:
    """The registry database answers and is at this kappa's schema revision."""
    from sqlalchemy.exc import SQLAlchemyError

    from orchestrator.registry.engine import (
        display_url,
        make_engine,
        missing_sqlite_file,
        normalize_url,
    )
    from orchestrator.registry.schema import SchemaState, schema_status

    try:
        url = normalize_url(paths.registry_url(options.registry))
    except UserInputError as exc:
        return CheckResult("registry", Status.PROBLEM, exc.summary,
                           fix=exc.problems[0].render() if exc.problems else None)
    shown = display_url(url)
    if missing_sqlite_file(url):
        return _missing_local("registry", str(url.database))
    # psycopg's default connect timeout is 130 s; the doctor asks once, bounded.
    url = _bounded_db_url(url, options.network_timeout_s)
    engine = make_engine(url)
    try:
        status = schema_status(engine)
    except SQLAlchemyError as exc:
        return CheckResult("registry", Status.PROBLEM, f"cannot connect to {shown}: "
                           f"{redact(_connect_failure(exc, url))}",
                           fix="check the server is up and the URL's host, port, user and "
                               "password", details={"url": shown})
    finally:
        engine.dispose()
    details = {"url": shown, "revision": status.current, "head": status.head,
               "state": status.state.value}
    upgrade = f"kappa db upgrade --registry '{shown}'"
    verdicts = {
        SchemaState.CURRENT: (Status.OK, f"at revision {status.current} (current)", None),
        SchemaState.EMPTY: (Status.OK, "empty; initialised on first use", None),
        SchemaState.OUTDATED: (Status.PROBLEM, f"at revision {status.current}, older than "
                               f"this kappa's {status.head}", upgrade),
        SchemaState.NEWER: (Status.PROBLEM, f"at revision {status.current}, made by a newer "
                            "kappa", "upgrade kappa, or point --registry at another database"),
        SchemaState.FOREIGN: (Status.PROBLEM, "has tables but is not a kappa registry",
                              "point --registry (or KAPPA_REGISTRY) at another database"),
    }
    status_, what, fix = verdicts[status.state]
    return CheckResult("registry", status_, f"{shown}: {what}", fix=fix, details=details)
