"""What the MLflow UI shows, checked through a real ``mlflow server``'s REST API.

A tiny finished sweep (fake backend) is served by ``kappa ui SWEEP --open`` (which
becomes ``mlflow server``) on a free port; the UI's runs table, compare view, grouping,
charts and artifact pages read exactly these endpoints: runs/search (filter by
``tags.kappa.sweep``), runs/get, metrics/get-history, experiments/get (saved views) and
artifacts/list with get-artifact. Child runs must carry a short name made of the axes
that vary, the parent run id tag, ``axis.<name>`` tags (group by) AND params, once
(parallel coordinates plots params and metrics), and the final metrics as metrics; the
parent run the sweep's table, report and delta metrics; the experiment the saved view
``kappa ui`` prints (and opens), in a route and with query keys the served UI bundle knows.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.home import register_backends, seed_mlflow_store
from kit.mlflow_ui import (
    STARTUP_LIMIT,
    Served,
    artifact,
    get,
    post,
    served,
)

from orchestrator.registry import Registry
from orchestrator.sweeps.driver import submit

SPEC = """\
name: ui-mini
backend: fake
base: {steps: 2, step_seconds: 0}
axes:
  baseline: [grpo, dapo]
  reward_budget: [false, true]
  seed: [0, 1]
"""
CELLS = 8


@pytest.fixture(scope="module")
def served_sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A finished 8-cell sweep, its summary published when it ended, served by ``kappa ui
    ui-mini --open``."""
    home = tmp_path_factory.mktemp("ui") / "home"
    seed_mlflow_store(home)
    spec = home.parent / "ui.yaml"
    spec.write_text(SPEC)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KAPPA_HOME", str(home))
        mp.setenv("KAPPA_POLL_INTERVAL", "0.05")
        mp.setenv("KAPPA_MLFLOW_SUMMARY", "1")
        register_backends(mp)
        submit(spec, wait=True, max_parallel=2)
    with served(home, "ui-mini") as up:
        yield up


@pytest.mark.slow
def test_ui_endpoints_see_names_tags_params_and_metrics(served_sweep: Served) -> None:
    base, home = served_sweep.base, served_sweep.home
    with Registry.open(f"sqlite:///{home / 'registry.db'}") as reg:
        sweep = reg.get_sweep("ui-mini")
        cells = {c.mlflow_run_id: c for c in reg.cells("ui-mini")}
    found = post(base, "/api/2.0/mlflow/runs/search", {
        "experiment_ids": [sweep.mlflow_experiment_id],
        "filter": "tags.`kappa.sweep` = 'ui-mini'", "max_results": 100})
    runs = {r["info"]["run_id"]: r for r in found["runs"]}
    assert set(runs) == {*cells, sweep.mlflow_parent_run_id}
    for run_id, cell in cells.items():
        run = get(base, "/api/2.0/mlflow/runs/get", run_id=run_id or "")["run"]
        assert run == runs[run_id] or run["info"]["run_id"] == run_id
        tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
        params = {p["key"]: p["value"] for p in run["data"]["params"]}
        metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
        baseline, seed = cell.axes["baseline"], str(cell.axes["seed"])
        rb = "+RB" if cell.axes["reward_budget"] else "-RB"
        assert run["info"]["run_name"] == f"{baseline} {rb} s{seed}"
        assert run["info"]["status"] == "FINISHED"
        assert tags["mlflow.parentRunId"] == sweep.mlflow_parent_run_id
        assert (tags["axis.baseline"], tags["axis.seed"]) == (baseline, seed)
        assert (params["axis.baseline"], params["axis.seed"]) == (baseline, seed)
        # Each axis once among the params: not also as the setting it sets.
        assert not {"baseline", "reward_budget", "seed"} & set(params), sorted(params)
        assert metrics["eval/toy/mean_at_4"] == pytest.approx(
            cell.final_metrics["eval/toy/mean@4"])
        history = get(base, "/api/2.0/mlflow/metrics/get-history", run_id=run_id or "",
                       metric_key="eval/toy/mean_at_4")["metrics"]
        assert [(h["step"], h["value"]) for h in history] == [
            (2, pytest.approx(cell.final_metrics["eval/toy/mean@4"]))]
    # Grouping by an axis in the UI is a filter on its tag, which the server answers.
    grpo = post(base, "/api/2.0/mlflow/runs/search", {
        "experiment_ids": [sweep.mlflow_experiment_id],
        "filter": "tags.`axis.baseline` = 'grpo'"})
    assert len(grpo["runs"]) == CELLS // 2


@pytest.mark.slow
def test_the_parent_run_holds_the_table_report_plots_and_deltas(served_sweep: Served) -> None:
    """Attached when the sweep ended: what the run's Artifacts tab and metrics show."""
    base = served_sweep.base
    with Registry.open(f"sqlite:///{served_sweep.home / 'registry.db'}") as reg:
        parent = reg.get_sweep("ui-mini").mlflow_parent_run_id or ""

    def listed(path: str = "") -> set[str]:
        files = get(base, "/api/2.0/mlflow/artifacts/list", run_id=parent, path=path)
        return {f["path"] for f in files.get("files", [])}

    assert {"spec.yaml", "report.html", "ablation", "plots"} <= listed()
    assert listed("ablation") == {f"ablation/main-table.{ext}" for ext in ("md", "html", "csv")}
    table = artifact(base, parent, "ablation/main-table.md")
    assert "Metric: eval/*/mean@4" in table and "| GRPO |" in table and "| + RB |" in table
    assert artifact(base, parent, "ablation/main-table.csv").startswith("block,Method,kind,n,")
    assert "<table" in artifact(base, parent, "ablation/main-table.html")
    assert "ui-mini" in artifact(base, parent, "report.html")
    run = get(base, "/api/2.0/mlflow/runs/get", run_id=parent)["run"]
    metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
    # The fake trainer adds 0.05 to its eval metrics with reward budgeting: 5 points.
    for base_row in ("GRPO", "DAPO"):
        assert metrics[f"delta/{base_row}/RB/Average"] == pytest.approx(5.0, abs=1e-6)
        assert metrics[f"delta/{base_row}/RB/Average/ci_low"] <= 5.0 + 1e-6
    tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
    assert tags["mlflow.note.content"].startswith("# ui-mini: Main table")


@pytest.mark.slow
def test_the_saved_view_finds_every_cell_grouped_by_the_compared_axis(
        served_sweep: Served) -> None:
    base = served_sweep.base
    with Registry.open(f"sqlite:///{served_sweep.home / 'registry.db'}") as reg:
        sweep = reg.get_sweep("ui-mini")
        cells = {c.mlflow_run_id for c in reg.cells("ui-mini")}
    experiment = get(base, "/api/2.0/mlflow/experiments/get",
                      experiment_id=sweep.mlflow_experiment_id or "")["experiment"]
    views = {t["key"]: t["value"] for t in experiment["tags"]
             if t["key"].startswith("mlflow.sharedViewState.")}
    [view] = views.values()
    state = json.loads(json.loads(view)["state"])
    assert state["runsHiddenMode"] == "SHOW_ALL"  # all 8 charted, not the first 10 runs' worth
    assert state["groupBy"]["groupByKeys"] == [{"mode": "tag",
                                                "groupByData": "axis.reward_budget"}]
    found = post(base, "/api/2.0/mlflow/runs/search", {
        "experiment_ids": [sweep.mlflow_experiment_id], "filter": state["searchFilter"]})
    assert {r["info"]["run_id"] for r in found["runs"]} == cells
    charted = re.compile(state["chartsSearchFilter"], re.IGNORECASE)
    assert charted.match("eval/toy/mean_at_4") and not charted.match("timing_s/step")


def _ui_bundle() -> str:
    """The installed MLflow UI's JavaScript (the one the server serves)."""
    import mlflow

    build = Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js"
    return "\n".join(p.read_text(errors="replace") for p in sorted(build.glob("*.js")))


@pytest.mark.slow
def test_kappa_ui_lands_on_the_sweeps_view(served_sweep: Served) -> None:
    """The printed URL: this server, the sweep's experiment, its runs tab, its saved view,
    charted, in Model training mode; ``--open`` opened the same URL."""
    base = served_sweep.base
    with Registry.open(f"sqlite:///{served_sweep.home / 'registry.db'}") as reg:
        sweep = reg.get_sweep("ui-mini")
    url = urllib.parse.urlsplit(served_sweep.printed)
    assert f"{url.scheme}://{url.netloc}" == base and url.path == "/"
    route, _, query = url.fragment.partition("?")
    assert route == f"/experiments/{sweep.mlflow_experiment_id}/runs"
    params = urllib.parse.parse_qs(query)
    assert params["workflowType"] == ["machine_learning"]
    assert params["compareRunsMode"] == ["CHART"]
    [key] = params["viewStateShareKey"]
    experiment = get(base, "/api/2.0/mlflow/experiments/get",
                      experiment_id=sweep.mlflow_experiment_id or "")["experiment"]
    assert f"mlflow.sharedViewState.{key}" in {t["key"] for t in experiment["tags"]}
    # The route, the query keys and the view's keys are the served UI's own (a new MLflow
    # may move them).
    bundle = _ui_bundle()
    for literal in ('"/experiments/:experimentId/runs"', 'get("workflowType")',
                    '"machine_learning"', '"viewStateShareKey"', '"compareRunsMode"',
                    '"mlflow.sharedViewState."', '"runsHiddenMode"', 'SHOWALL="SHOW_ALL"',
                    '"useGroupedValuesInCharts"', '"chartsSearchFilter"', 'Tag="tag"',
                    'Average="average"', 'e.get(o)||"TABLE"'):
        assert literal in bundle, literal
    deadline = time.monotonic() + STARTUP_LIMIT
    while not served_sweep.opened.exists():
        assert time.monotonic() < deadline, "--open never opened a browser"
        time.sleep(0.2)
    assert served_sweep.opened.read_text() == served_sweep.printed
    # The store reached the server through its environment, not its command line.
    import psutil

    [server] = [p.cmdline() for p in psutil.Process(served_sweep.pid).children()]
    assert "--backend-store-uri" not in server and "server" in server, server


@pytest.mark.slow
def test_kappa_ui_prints_the_url_last_without_the_servers_noise(served_sweep: Served) -> None:
    """Before, four Starlette deprecation warnings, "Registry store URI not provided" and
    uvicorn's start-up lines came after the URL and scrolled it away (issue 18, 7)."""
    lines = served_sweep.log.read_text().splitlines()
    assert lines[0].startswith("starting the MLflow UI on 127.0.0.1:"), lines
    assert lines[1] == f"MLflow UI: {served_sweep.printed}", lines
    assert lines[2].startswith("  every cell of sweep ui-mini charted"), lines
    assert lines[3].startswith(f"  its table and report: {served_sweep.base}/#/experiments/")
    assert "Ctrl-C" in lines[4], lines
    for noise in ("Warning", "Registry store URI", "INFO:", "Security middleware"):
        assert not any(noise in line for line in lines), (noise, lines)
