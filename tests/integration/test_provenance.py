"""Every attempt records what made its numbers, and every face shows it: the registry (the
attempt and the cell), ``summary.json``, the cell's MLflow run (tags), ``kappa status
--json``, the export and the API's frame. One tiny real embedded sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kit.cli import run_kappa
from kit.home import use_home
from kit.tiny_spec import finished_tiny_sweep
from sqlalchemy import create_engine, update

from orchestrator import api, paths
from orchestrator.analysis.frame import frame_text
from orchestrator.backends.embedded.backend import EmbeddedBackend
from orchestrator.registry import CellState, Registry
from orchestrator.registry.models import CellRow
from orchestrator.runs.folder import read_summary

NAME = "prov"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished two-cell sweep (its KAPPA_HOME)."""
    return finished_tiny_sweep(tmp_path_factory.mktemp("prov"), NAME) / "home"


def test_each_attempt_and_its_cell_record_code_numerics_and_machine(
        swept: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_home(swept, monkeypatch)
    installed = EmbeddedBackend().numerics()
    with Registry.open() as reg:
        cells = reg.cells(NAME)
        assert [c.state for c in cells] == [CellState.SUCCEEDED] * 2
        for cell in cells:
            made = dict(cell.provenance or {})
            assert made["numerics"]["backend"] == "embedded"
            assert {k: made["numerics"][k] for k in installed} == installed
            assert len(made["numerics"]["base_model"]) == 16  # the weights' SHA-256
            assert made["machine"]["cpu_capability"]  # e.g. AVX512 / AVX2 / DEFAULT
            assert made["machine"]["executor"] == "local"
            assert made["kappa"]["version"]
            attempts = reg.attempts(cell)
            assert [a.provenance for a in attempts] == [cell.provenance]
            summary = read_summary(Path(cell.run_dir or ""))
            assert summary is not None and summary["provenance"] == made


def test_the_cells_mlflow_run_status_json_export_and_api_show_it(
        swept: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_home(swept, monkeypatch)
    from mlflow import MlflowClient

    from orchestrator.tracking import Tracker

    with Registry.open() as reg:
        cell = reg.cells(NAME)[0]
    made = dict(cell.provenance or {})
    tags = MlflowClient(Tracker().uri).get_run(cell.mlflow_run_id or "").data.tags
    assert tags["kappa.numerics.backend"] == "embedded"
    assert tags["kappa.numerics.torch"] == made["numerics"]["torch"]
    assert tags["kappa.machine.cpu_capability"] == made["machine"]["cpu_capability"]

    status = api.status(NAME).as_json()
    assert status["made_by"].startswith("1 environment (embedded v")
    assert f"; kappa {made['kappa']['version']}" in status["made_by"]
    assert status["cells"][0]["provenance"] == made

    frame = api.cells(NAME)
    assert set(frame["prov.numerics.torch"]) == {made["numerics"]["torch"]}
    assert set(frame["prov.machine.cpu_capability"]) == {made["machine"]["cpu_capability"]}
    assert frame["numerics"].str.startswith("embedded v").all()
    exported = json.loads(frame_text(frame, "json"))  # what `kappa export` writes
    assert exported[0]["prov.numerics.backend"] == "embedded"


def test_export_notes_runs_of_other_numerics_and_strict_refuses_them(
        swept: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    use_home(swept, monkeypatch)
    assert run_kappa(capsys, "export", NAME, "--strict").code == 0
    with Registry.open() as reg:
        cell = reg.cells(NAME)[1]
    made = dict(cell.provenance or {})
    other = {**made, "numerics": {**made["numerics"], "torch": "0.0.1"}}
    engine = create_engine(paths.registry_url())
    with engine.begin() as conn:  # as if that cell had run under another torch
        conn.execute(update(CellRow).where(CellRow.cell_id == cell.cell_id)
                     .values(provenance=other))
    engine.dispose()
    try:
        noted = run_kappa(capsys, "export", NAME)
        assert noted.code == 0 and "vs 0.0.1" in noted.err
        refused = run_kappa(capsys, "export", NAME, "--strict")
        assert refused.code == 2 and "0.0.1" in refused.output
        checked = run_kappa(capsys, "stop-check", NAME, "--strict")
        assert checked.code == 2 and "0.0.1" in checked.output
    finally:
        engine = create_engine(paths.registry_url())
        with engine.begin() as conn:
            conn.execute(update(CellRow).where(CellRow.cell_id == cell.cell_id)
                         .values(provenance=made))
        engine.dispose()


@pytest.mark.parametrize("content", [
    "not json", "[1, 2]", '{"numerics": [1]}', "{" + '"a": 1, ' * 20_000 + '"b": 2}',
    '{"numerics": {"backend": "embedded", "torch": {"nested": "junk"}, "x": "' + "y" * 2000
    + '"}, "machine": "no", "evil": {"k": "v"}}',
])
def test_a_hostile_provenance_file_is_ignored_or_trimmed(tmp_path: Path, content: str) -> None:
    from orchestrator.runs import provenance

    (tmp_path / provenance.PROVENANCE_FILE).write_text(content, encoding="utf-8")
    found = provenance.read(tmp_path)
    if found is None:
        return
    # Only the known sections, only short scalar fields.
    assert set(found) <= set(provenance.SECTIONS)
    for fields in found.values():
        assert all(isinstance(v, str | int | float | bool) or v is None for v in fields.values())
        assert all(len(v) <= provenance.MAX_TEXT for v in fields.values() if isinstance(v, str))
    assert provenance.label(provenance.numerics_key(found))  # renders without error
