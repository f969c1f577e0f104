"""The MLflow UI address of a sweep, and which local stores a read may open."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from orchestrator import paths
from orchestrator.backends.verl.run_phases import forwarded_env
from orchestrator.tracking.ui import (
    VIEW_TAG_PREFIX,
    artifacts_url,
    browser_host,
    experiments_url,
    has_view,
    runs_url,
    sweep_filter,
    sweep_view,
    view_key,
    view_url,
    without_credentials,
)


@pytest.mark.parametrize("sweep", ["toy-table2", "a.b_c", "it's", "x y"])
def test_runs_url_encodes_route_and_filter(sweep: str) -> None:
    url = urlsplit(runs_url("http://127.0.0.1:5000/", "42", sweep))
    assert (url.scheme, url.netloc, url.path) == ("http", "127.0.0.1:5000", "/")
    route, _, query = url.fragment.partition("?")
    assert route == "/experiments/42/runs"
    assert parse_qs(query) == {"workflowType": ["machine_learning"],
                               "searchFilter": [sweep_filter(sweep)]}
    assert " " not in url.fragment and "'" not in url.fragment


def test_sweep_filter_quotes_the_name() -> None:
    assert sweep_filter("toy") == "tags.`kappa.sweep` = 'toy'"
    assert sweep_filter("it's") == "tags.`kappa.sweep` = 'it\\'s'"


def test_experiments_url_and_hosts() -> None:
    assert experiments_url("http://h:1") == "http://h:1/#/experiments?workflowType=machine_learning"
    assert browser_host("0.0.0.0") == "127.0.0.1"
    assert browser_host("::1") == "[::1]"
    assert browser_host("10.0.0.2") == "10.0.0.2"


@pytest.mark.parametrize(("url", "expected"), [
    ("https://u:s3cret@mlflow.example:8443/base", "https://mlflow.example:8443/base"),
    ("http://u@[::1]:5000", "http://[::1]:5000"),
    ("http://mlflow:5000", "http://mlflow:5000"),
])
def test_without_credentials(url: str, expected: str) -> None:
    assert without_credentials(url) == expected


def test_reads_do_not_open_missing_local_stores(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KAPPA_MLFLOW_URI", raising=False)
    assert paths.readable_mlflow_uri() is None
    assert paths.readable_mlflow_uri(f"file://{tmp_path}/mlruns") is None
    (tmp_path / "mlruns").mkdir()
    assert paths.readable_mlflow_uri(f"file://{tmp_path}/mlruns") == f"file://{tmp_path}/mlruns"
    assert paths.readable_mlflow_uri("http://mlflow:5000") == "http://mlflow:5000"
    assert paths.local_store_path("sqlite:///rel.db") == Path("rel.db").resolve()


def test_verl_command_line_gets_no_credentials() -> None:
    env = {"MLFLOW_TRACKING_URI": "postgresql://u:s3cret@db/ml", "MLFLOW_RUN_ID": "abc",
           "OTHER": "x"}
    assert forwarded_env(env) == {"MLFLOW_RUN_ID": "abc"}
    env["MLFLOW_TRACKING_URI"] = "http://mlflow:5000"
    assert forwarded_env(env) == {"MLFLOW_TRACKING_URI": "http://mlflow:5000",
                                  "MLFLOW_RUN_ID": "abc"}


def test_the_saved_view_charts_every_cell_grouped_by_the_compared_axis() -> None:
    key, value = sweep_view("toy-demo", ["reward_budget"], "^(eval/.*)$", 1_700_000_000_000)
    assert key == VIEW_TAG_PREFIX + view_key("toy-demo")
    assert len(key) <= 250 and view_key("toy-demo") != view_key("toy-demo2")
    envelope = json.loads(value)
    assert envelope["name"] == "kappa: toy-demo by reward_budget"
    assert envelope["createdAt"] == envelope["updatedAt"] == 1_700_000_000_000
    state = json.loads(envelope["state"])
    assert state == {
        "searchFilter": "tags.`kappa.sweep` = 'toy-demo' and tags.`kappa.role` = 'cell'",
        "runsHiddenMode": "SHOW_ALL", "useGroupedValuesInCharts": True,
        "groupBy": {"aggregateFunction": "average",
                    "groupByKeys": [{"mode": "tag", "groupByData": "axis.reward_budget"}]},
        "chartsSearchFilter": "^(eval/.*)$"}
    assert json.loads(json.loads(sweep_view("s", [], "", 0)[1])["state"])["groupBy"] is None


def test_view_and_artifact_urls() -> None:
    url = urlsplit(view_url("http://h:5000/", "7", "toy-demo"))
    route, _, query = url.fragment.partition("?")
    assert route == "/experiments/7/runs"
    assert parse_qs(query) == {"workflowType": ["machine_learning"],
                               "viewStateShareKey": [view_key("toy-demo")],
                               "compareRunsMode": ["CHART"]}
    assert artifacts_url("http://h:5000", "7", "abc") == (
        "http://h:5000/#/experiments/7/runs/abc/artifacts?workflowType=machine_learning")
    assert artifacts_url("http://h:5000", "7", "abc", "ablation/main table.md") == (
        "http://h:5000/#/experiments/7/runs/abc/artifacts/ablation/main%20table.md"
        "?workflowType=machine_learning")


@pytest.fixture
def tags_server() -> Iterator[tuple[str, list[dict[str, str]], list[str]]]:
    """A server answering experiments/get with the tags in the list (headers seen in the
    other list)."""
    tags: list[dict[str, str]] = []
    auth: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            auth.append(self.headers.get("Authorization", ""))
            body = json.dumps({"experiment": {"experiment_id": "1", "tags": tags}}).encode()
            self.send_response(200 if "experiment_id=1" in self.path else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", tags, auth
    finally:
        server.shutdown()
        server.server_close()


def test_has_view_asks_the_server(tags_server: tuple[str, list[dict[str, str]], list[str]]
                                  ) -> None:
    base, tags, auth = tags_server
    assert not has_view(base, "1", "toy-demo")
    tags.append({"key": VIEW_TAG_PREFIX + view_key("other"), "value": "{}"})
    assert not has_view(base, "1", "toy-demo")
    tags.append({"key": VIEW_TAG_PREFIX + view_key("toy-demo"), "value": "{}"})
    assert has_view(base, "1", "toy-demo")
    assert not has_view(base, "2", "toy-demo")  # 404: cannot say
    assert not has_view("http://127.0.0.1:9", "1", "toy-demo", timeout=2)  # nobody there
    host = base.removeprefix("http://")
    assert has_view(f"http://u:pw@{host}", "1", "toy-demo")
    assert auth[-1] == "Basic dTpwdw=="  # u:pw, sent, never in the URL asked
