"""Where the MLflow UI shows a sweep: the URL of its runs, and its saved view (light
imports only).

MLflow 3's UI opens an experiment on its GenAI pages unless the browser's workflow switch
(local storage ``mlflow.workflowType``, not the ``mlflow.experimentKind`` tag) says *Model
training*; it also reads the switch from the query (``workflowType=machine_learning``),
so these URLs land on the training runs in any browser. Routes and keys are the UI
bundle's (MLflow 3.x hash router): ``#/experiments/<id>/runs`` with ``searchFilter``.

A sweep's *saved view* is what the UI's **Views** menu saves: an experiment tag
``mlflow.sharedViewState.<key>`` holding ``{"name", "createdAt", "updatedAt", "state"}``,
``state`` the runs page's state as JSON (search, grouping, which runs are shown, the
charts' search). ``?viewStateShareKey=<key>&compareRunsMode=CHART`` opens it, charted.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

WORKFLOW_QUERY = {"workflowType": "machine_learning"}
SERVER_SCHEMES = ("http", "https")
UI_PORT = 5000  # where `kappa ui` serves a local store by default
LOCAL_UI = f"http://127.0.0.1:{UI_PORT}"
VIEW_TAG_PREFIX = "mlflow.sharedViewState."


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


def view_key(sweep: str) -> str:
    """The key of ``sweep``'s saved view (letters, digits and ``-``: a tag key's tail)."""
    return "kappa-" + hashlib.sha256(sweep.encode()).hexdigest()[:16]


def sweep_view(sweep: str, group_by: Sequence[str], charts: str,
               now_ms: int) -> tuple[str, str]:
    """``(tag key, tag value)`` of ``sweep``'s saved view: its cells, every one shown
    (the UI's default charts the first 10 only), grouped by the ``group_by`` axes' tags
    (each group's curve the mean of its runs), the charts whose metric matches the regex
    ``charts`` (the UI's chart search; ``""``: all)."""
    keys = [{"mode": "tag", "groupByData": f"axis.{axis}"} for axis in group_by]
    state = {"searchFilter": f"{sweep_filter(sweep)} and tags.`kappa.role` = 'cell'",
             "runsHiddenMode": "SHOW_ALL", "useGroupedValuesInCharts": True,
             "groupBy": {"aggregateFunction": "average", "groupByKeys": keys} if keys else None,
             "chartsSearchFilter": charts}
    name = f"kappa: {sweep}" + (f" by {', '.join(group_by)}" if group_by else "")
    return VIEW_TAG_PREFIX + view_key(sweep), json.dumps({
        "name": name, "createdAt": now_ms, "updatedAt": now_ms, "state": json.dumps(state)})


def view_url(base: str, experiment_id: str, sweep: str) -> str:
    """The UI page of ``sweep``'s saved view (:func:`sweep_view`), in chart mode."""
    query = urlencode({**WORKFLOW_QUERY, "viewStateShareKey": view_key(sweep),
                       "compareRunsMode": "CHART"})
    return f"{base.rstrip('/')}/#/experiments/{quote(experiment_id, safe='')}/runs?{query}"


def artifacts_url(base: str, experiment_id: str, run_id: str, path: str = "") -> str:
    """The UI page of a run's artifacts, ``path`` selected, in *Model training* mode."""
    tail = "/".join(quote(part, safe="") for part in ["artifacts", *path.split("/")] if part)
    return (f"{base.rstrip('/')}/#/experiments/{quote(experiment_id, safe='')}/runs/"
            f"{quote(run_id, safe='')}/{tail}?{urlencode(WORKFLOW_QUERY)}")


def has_view(server: str, experiment_id: str, sweep: str, timeout: float = 10.0) -> bool:
    """Whether the MLflow server at ``server`` (credentials in it are sent) holds
    ``sweep``'s saved view; ``False`` when it cannot say."""
    import urllib.request

    parts = urlsplit(server)
    request = urllib.request.Request(
        f"{without_credentials(server).rstrip('/')}/api/2.0/mlflow/experiments/get?"
        + urlencode({"experiment_id": experiment_id}))
    if parts.username is not None:
        token = f"{parts.username}:{parts.password or ''}".encode()
        request.add_header("Authorization", "Basic " + base64.b64encode(token).decode())
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            tags = json.loads(answer.read()).get("experiment", {}).get("tags", [])
    except (OSError, ValueError, AttributeError):
        return False
    key = VIEW_TAG_PREFIX + view_key(sweep)
    return any(isinstance(t, dict) and t.get("key") == key for t in tags)


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
