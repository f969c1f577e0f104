"""Stale results: after the embedded backend's numerics version is bumped, ``kappa plan`` and
``kappa submit`` list the finished cells that the old numerics made, ``submit`` keeps them and
says how to rerun them, and ``submit --rerun-stale`` reruns exactly those, afresh. And the
registry stores (and the run folder's ``config.yaml`` holds) the resolved settings each id
hashes. One tiny real embedded sweep (two cells, two steps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kit.cli import run_kappa
from kit.home import use_home
from kit.tiny_spec import finished_tiny_sweep
from sqlalchemy import create_engine, update

from orchestrator import paths
from orchestrator.backends.embedded.backend import EmbeddedBackend
from orchestrator.grid.identity import content_id
from orchestrator.registry import CellRecord, CellState, Registry
from orchestrator.registry.models import CellRow
from orchestrator.runs.folder import CONFIG_FILE

NAME = "numerics-bump"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished two-cell sweep: its folder (``spec.yaml``, ``home/``)."""
    return finished_tiny_sweep(tmp_path_factory.mktemp("stale"), NAME)


def _cells() -> list[CellRecord]:
    with Registry.open() as reg:
        return reg.cells(NAME)


def _set_provenance(cell_id: str, record: dict[str, object] | None) -> None:
    engine = create_engine(paths.registry_url())
    with engine.begin() as conn:
        conn.execute(update(CellRow).where(CellRow.cell_id == cell_id)
                     .values(provenance=record))
    engine.dispose()


def test_the_registry_stores_the_resolved_settings_the_id_hashes(
        swept: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_home(swept / "home", monkeypatch)
    backend = EmbeddedBackend()
    for cell in _cells():
        assert cell.settings == backend.validate(cell.settings).model_dump(mode="json")
        assert content_id("embedded", cell.settings, cell.labels) == cell.cell_id
        assert "clip_ratio" in cell.settings  # a default the spec never wrote
        config = Path(cell.run_dir or "") / CONFIG_FILE
        assert yaml.safe_load(config.read_text()) == cell.settings  # what the job ran


def test_rerun_stale_with_nothing_stale_says_so(
        swept: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    use_home(swept / "home", monkeypatch)
    spec = str(swept / "spec.yaml")
    planned = run_kappa(capsys, "plan", spec)
    assert planned.code == 0 and "stale" not in planned.output.replace(NAME, "")
    ran = run_kappa(capsys, "submit", spec, "--rerun-stale", "--wait")
    assert ran.code == 0, ran.output
    assert "0 requeued" in ran.out and "nothing stale" in ran.out
    assert [c.attempts_count for c in _cells()] == [1, 1]


def test_a_bumped_numerics_version_lists_the_finished_cells_and_reruns_exactly_those(
        swept: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    home = use_home(swept / "home", monkeypatch)
    spec = str(swept / "spec.yaml")
    old, fresh = _cells()
    made = dict(fresh.provenance or {})
    monkeypatch.setattr(EmbeddedBackend, "numerics_version", "2")
    planned = run_kappa(capsys, "plan", spec)
    assert planned.code == 0
    assert "2 finished cells are stale" in planned.out
    assert "numerics version 1 vs 2 (2 cells)" in planned.out
    assert f"stale: {old.cell_id}, {fresh.cell_id}" in planned.out
    # As if the new numerics had made one of them: only the other is stale.
    _set_provenance(fresh.cell_id, {**made, "numerics": {**made["numerics"], "version": "2"}})
    try:
        listed = json.loads(run_kappa(capsys, "plan", spec, "--json").out)["stale"]
        assert (listed["count"], listed["cell_ids"]) == (1, [old.cell_id])
        assert listed["differences"] == {"numerics version 1 vs 2": 1}

        kept = run_kappa(capsys, "submit", spec, "--wait")
        assert kept.code == 0, kept.output
        assert "0 requeued" in kept.out and f"stale: {old.cell_id}" in kept.out
        assert f"kappa submit {spec} --rerun-stale" in kept.out
        assert [c.attempts_count for c in _cells()] == [1, 1]

        rerun = run_kappa(capsys, "submit", spec, "--rerun-stale", "--wait")
        assert rerun.code == 0, rerun.output
        assert "1 requeued" in rerun.out and "they run again" in rerun.out
        after = {c.cell_id: c for c in _cells()}
        assert after[old.cell_id].state is CellState.SUCCEEDED
        assert [after[old.cell_id].attempts_count, after[fresh.cell_id].attempts_count] == [2, 1]
        # Afresh: the old run folder (checkpoints and all) was moved aside, not resumed.
        runs = home / "runs" / NAME
        assert sorted(p.name for p in runs.glob("*.prev-*")) == [f"{old.cell_id}.prev-1"]
        steps = {folder: [json.loads(line)["step"] for line in
                          (runs / folder / "metrics.jsonl").read_text().splitlines()]
                 for folder in (old.cell_id, f"{old.cell_id}.prev-1")}
        assert steps[old.cell_id] == steps[f"{old.cell_id}.prev-1"], steps  # from step 0
    finally:
        _set_provenance(fresh.cell_id, made)
