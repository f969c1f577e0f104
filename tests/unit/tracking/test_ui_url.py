"""The MLflow UI address of a sweep, and which local stores a read may open."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from orchestrator import paths
from orchestrator.backends.verl.run_phases import forwarded_env
from orchestrator.tracking.ui import (
    browser_host,
    experiments_url,
    runs_url,
    sweep_filter,
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
