"""Where the MLflow UI shows a sweep: the URL of its runs (light imports only).

MLflow 3's UI opens an experiment on its GenAI pages unless the browser's workflow switch
(local storage ``mlflow.workflowType``, not the ``mlflow.experimentKind`` tag) says *Model
training*; it also reads the switch from the query (``workflowType=machine_learning``),
so these URLs land on the training runs in any browser. Routes and keys are the UI
bundle's (MLflow 3.x hash router): ``#/experiments/<id>/runs`` with ``searchFilter``.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode, urlsplit, urlunsplit

WORKFLOW_QUERY = {"workflowType": "machine_learning"}
SERVER_SCHEMES = ("http", "https")
UI_PORT = 5000  # where `kappa ui` serves a local store by default
LOCAL_UI = f"http://127.0.0.1:{UI_PORT}"


def sweep_filter(sweep: str) -> str:
    """The runs search that shows one sweep's runs (its parent run and every cell)."""
    escaped = sweep.replace("\\", "\\\\").replace("'", "\\'")
    return f"tags.`kappa.sweep` = '{escaped}'"


def runs_url(base: str, experiment_id: str, sweep: str) -> str:
    """The UI page of ``sweep``'s training runs, filtered to it, in *Model training* mode.

    >>> runs_url("http://127.0.0.1:5000", "3", "toy-table2")
    "http://127.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning&searchFilter=tags.%60kappa.sweep%60%20%3D%20%27toy-table2%27"
    """
    query = urlencode({**WORKFLOW_QUERY, "searchFilter": sweep_filter(sweep)}, quote_via=quote)
    return f"{base.rstrip('/')}/#/experiments/{quote(experiment_id, safe='')}/runs?{query}"


def experiments_url(base: str) -> str:
    """The UI's list of experiments (no sweep to land on)."""
    return f"{base.rstrip('/')}/#/experiments?{urlencode(WORKFLOW_QUERY)}"


def is_server(uri: str) -> bool:
    """Whether the tracking URI is an MLflow server (whose own UI is at that address)."""
    return urlsplit(uri).scheme in SERVER_SCHEMES


def ui_base(uri: str) -> str:
    """Where the MLflow UI of the store at ``uri`` is: an MLflow server's own address, else
    (a local store) the address `kappa ui` serves it at by default."""
    return without_credentials(uri) if is_server(uri) else LOCAL_UI


def without_credentials(url: str) -> str:
    """``url`` without ``user:password@`` (a browser asks for them itself)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit(parts._replace(netloc=netloc))


def browser_host(host: str) -> str:
    """The address a browser on this machine reaches a server bound to ``host`` at."""
    if host in ("0.0.0.0", "", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
