"""The sweep report end to end: a real spec, grid and registry, run folders with curves,
then the HTML opened in headless Chromium (rendered tables and plots coloured by the
compared axis, no console errors).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from kit.svg_lines import line_colors
from kit.synthetic import synthetic_cells, write_run_folders

from orchestrator.analysis.dynamics import PALETTE
from orchestrator.analysis.frame import CellResult
from orchestrator.analysis.report import build_report
from orchestrator.tracking.ui import LOCAL_UI

ROOT = Path(__file__).resolve().parents[2]
TOY_SPEC = ROOT / "experiments" / "toy" / "table2.yaml"
# The toy Table 2 with one seed: twelve cells, one per baseline and ±RB.
TOY_ONE_SEED = TOY_SPEC.read_text().replace("  seed: [0, 1, 2]\n", "")
ARTIFACTS = ROOT / "test-artifacts"
MLFLOW_UI = "http://127.0.0.1:5000"


def _stored_sweep(home: Path) -> str:
    """The toy Table 2 sweep in a real registry: 10 succeeded, 1 failed, 1 running."""
    registry = pytest.importorskip("orchestrator.registry")
    from orchestrator.grid.plan import parse_plan

    planned = parse_plan(TOY_ONE_SEED, str(TOY_SPEC))
    spec, grid = planned.spec, planned.grid
    state = registry.CellState
    fake = {c.cell_id: c for c in synthetic_cells(spec.name, seeds=(0,))}
    with registry.Registry.open() as reg:
        reg.upsert_sweep(
            spec.name,
            backend=spec.backend,
            spec_text=TOY_ONE_SEED,
            mlflow_experiment_id="7",
            plan=planned.sweep_plan().to_json(),
        )
        reg.add_cells(spec.name, grid.cells)
        for i, cell in enumerate(grid.cells):
            key = (spec.name, cell.cell_id)
            axes = cell.axes
            numbers = fake[f"tiny-{axes['baseline']}-rb{int(axes['reward_budget'])}-s0"]
            outcome = "running" if i == 11 else "failed" if i == 10 else "succeeded"
            [written] = write_run_folders(
                home / "runs",
                [CellResult(spec.name, cell.cell_id, outcome, axes, numbers.final_metrics)],
                steps=50,
                seed=i,
            )
            reg.update_cell(key, run_dir=written.run_dir, mlflow_run_id=f"run{i:04d}")
            assert reg.transition(key, state.PENDING, state.QUEUED)
            assert reg.start_attempt(key) is not None
            if outcome != "running":
                assert reg.finish_attempt(
                    key,
                    state.SUCCEEDED if outcome == "succeeded" else state.FAILED,
                    exit_code=0 if outcome == "succeeded" else 1,
                    final_metrics=dict(numbers.final_metrics) if outcome == "succeeded" else None,
                )
    return spec.name


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as mp:  # one report for the module's tests
        mp.setenv("KAPPA_HOME", str(tmp / "home"))
        sweep = _stored_sweep(tmp / "home")
        out = tmp / "report.html"
        out.write_text(build_report(sweep, mlflow_ui=MLFLOW_UI), encoding="utf-8")
    return out


def test_report_content_is_self_contained(report_file: Path) -> None:
    html = report_file.read_text()
    assert 'id="status-matrix"' in html
    assert html.count('class="cell state-succeeded"') == 10
    assert html.count('class="cell state-failed"') == 1
    assert html.count('class="cell state-running"') == 1
    assert f'href="{MLFLOW_UI}/#/experiments/7/runs/run0000"' in html
    assert "Main table (signed deltas vs each baseline)" in html
    assert html.count('<tr class="delta">') == 6
    assert html.count('<tr class="delta"><td class="label">+ RB</td><td class="n">1</td>') == 5
    assert "no base run" not in html
    assert "— (failed)" in html and "— (running)" in html
    # Plots are inline SVG, one per quantity, coloured by the axis the main table compares.
    assert html.count('<div class="plot"><svg') == 4 and "<script" not in html
    assert "Compared: <b>reward_budget</b> (colour) · one plot per <b>baseline</b>" in html
    assert len(html.encode()) < 1_000_000, len(html.encode())
    assert "name: toy-table2" in html and "12 cell(s)" in html
    # Offline: nothing is loaded from elsewhere.
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=\"https?:", html)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.mark.browser
def test_report_renders_in_headless_chromium(report_file: Path, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (make sysdeps / apt-get install -y chromium)")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    common = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--hide-scrollbars",
        "--virtual-time-budget=10000",
    ]
    url = report_file.as_uri()
    dom = subprocess.run(
        [
            *common,
            f"--user-data-dir={tmp_path / 'profile-dom'}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    # The browser parsed the inline SVGs: every run's line is coloured by its reward_budget.
    colors = line_colors(dom.stdout)
    runs = {k: c for k, c in colors.items() if k.startswith("run|val-core/")}
    assert len(runs) == 12, sorted(colors)
    expected = {"False": PALETTE[0].lower(), "True": PALETTE[1].lower()}
    assert all(c == expected[k.split("|")[2]] for k, c in colors.items()), colors
    assert 'class="kappa-table"' in dom.stdout and 'id="status-matrix"' in dom.stdout
    subprocess.run(
        [
            *common,
            f"--user-data-dir={tmp_path / 'profile-shot'}",
            "--window-size=1300,2400",
            f"--screenshot={shot}",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert shot.exists() and shot.read_bytes()[:4] == b"\x89PNG"


def test_mlflow_links_follow_the_tracking_uri(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A local store: links to where `kappa ui` serves it, and the report says how to start
    it; an MLflow server: links to the server itself (without its credentials)."""
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    sweep = _stored_sweep(tmp_path / "home")
    html = build_report(sweep)
    assert f'href="{LOCAL_UI}/#/experiments/7/runs/run0000"' in html
    assert f"(start it with <code>kappa ui {sweep}</code>)" in html
    # Port 9 (discard) refuses at once, and MLflow is told not to retry: the two cells
    # without final metrics ask the server, which leaves them without.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    html = build_report(sweep, mlflow_uri="http://user:secret@127.0.0.1:9")
    assert 'href="http://127.0.0.1:9/#/experiments/7/runs/run0000"' in html
    assert "start it with" not in html and "secret" not in html
