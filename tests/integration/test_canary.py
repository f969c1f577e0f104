"""Canary runs as a user starts them: real ``kappa`` processes, SQLite, MLflow.

The fake backend (``tests/kit/fake_backend.py``) gives cells that crash at a chosen step; the
real embedded trainer gives a cell that validates but crashes at its first RL step.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kit.cli import process, run_kappa
from kit.home import completions, launches, use_home

from orchestrator.registry import CellState, Registry

SAFETY = 300  # seconds; a guard against hangs, not a speed assertion

FAKE_SPEC = """\
name: {name}
backend: fake
retries: 2
base:
  steps: 4
axes:
  variant:
{variants}
  seed: [0, 1]
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch, cli=True)


def kappa(*args: str, cli: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run kappa (with the fake backends unless ``cli`` says otherwise); never raises."""
    return process(*args, code=None, timeout=SAFETY, command=cli)


def fake_spec(tmp_path: Path, name: str, variants: dict[str, int]) -> Path:
    """A fake spec: one variant per ``{name: fail_at_step}`` (0: never), seeds 0 and 1."""
    lines = "".join(f"    {v}: {{fail_at_step: {step}}}\n" for v, step in variants.items())
    path = tmp_path / f"{name}.yaml"
    path.write_text(FAKE_SPEC.format(name=name, variants=lines.rstrip("\n")))
    return path


def mlflow_runs(home: Path, experiment: str) -> list[dict[str, str]]:
    """Tags of every run of ``experiment`` (empty when it does not exist)."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    return [dict(r.data.tags) for r in client.search_runs([found.experiment_id])]


def test_a_canary_catches_a_cell_that_fails_at_its_first_step(
        home: Path, tmp_path: Path) -> None:
    spec = fake_spec(tmp_path, "crashy", {"ok": 0, "broken": 1, "late": 3})
    proc = kappa("submit", str(spec), "--canary", "--wait", "--max-parallel", "3")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    # 6 cells, 3 canaries: cells that differ only in the seed share one.
    assert "3 canaries for 6 cells" in out
    assert "1 of 3 failed" in out and "was not submitted" in out
    assert "variant=broken, seed=0" in out
    assert "ValueError: the reward function raised (on purpose)" in out  # the log tail
    with Registry.open() as reg:
        assert reg.find_sweep("crashy") is None  # the grid was never recorded
        canaries = {c.axes["variant"]: c for c in reg.cells("crashy.canary")}
    assert canaries["broken"].cell_id in out
    assert {v: c.state for v, c in canaries.items()} == {
        "ok": CellState.SUCCEEDED, "broken": CellState.FAILED,
        # It would crash at step 3; a canary runs 2 steps, so it passes (as it should).
        "late": CellState.SUCCEEDED}
    assert canaries["broken"].attempts_count == 1  # canaries are not retried
    assert all(c.total_steps == 2 or c.state is CellState.FAILED for c in canaries.values())
    # Recorded in MLflow as the canary sweep's own experiment, every run tagged.
    assert mlflow_runs(home, "crashy") == []
    tags = mlflow_runs(home, "crashy.canary")
    assert len(tags) == 4  # the parent run and one child per canary
    assert all(t.get("kappa.canary") == "true" for t in tags)
    assert sorted(completions(home)) == sorted(
        canaries[v].cell_id for v in ("ok", "late"))  # no grid cell ever ran

    # `kappa canary` again: the failed canary runs again, the passed ones do not.
    proc = kappa("canary", str(spec))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "2 had passed before" in proc.stdout
    run = home / "runs" / "crashy.canary"
    assert launches(run / canaries["broken"].cell_id) == [0, 0]
    assert launches(run / canaries["ok"].cell_id) == [0]


def test_passing_canaries_then_the_grid_alone_in_its_results(
        home: Path, tmp_path: Path) -> None:
    spec = fake_spec(tmp_path, "steady", {"ok": 0, "late": 3})
    dry = kappa("canary", str(spec), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "2 canaries for 4 cells" in dry.stdout and "steps 4→2" in dry.stdout
    assert not (home / "registry.db").exists()  # a dry run writes nothing
    # `late` cells fail at step 3 in the grid (with retries); their canary passed.
    proc = kappa("submit", str(spec), "--canary", "--wait", "--max-parallel", "4")
    out = proc.stdout + proc.stderr
    assert "canaries: all 2 passed" in out, out
    assert "sweep steady: 4 cells, 4 new" in out
    with Registry.open() as reg:
        grid = {c.cell_id: c for c in reg.cells("steady")}
        canary_ids = {c.cell_id for c in reg.cells("steady.canary")}
    assert len(grid) == 4 and len(canary_ids) == 2 and not canary_ids & set(grid)
    assert sorted(c.state.value for c in grid.values()) == ["failed"] * 2 + ["succeeded"] * 2
    # The grid's results hold its own cells only; its MLflow runs carry no canary tag.
    exported = kappa("export", "steady", "--format", "json", "-o", str(tmp_path / "r.json"))
    assert exported.returncode == 0, exported.stderr
    rows = json.loads((tmp_path / "r.json").read_text())
    assert {r["cell_id"] for r in rows} == set(grid)
    assert not any(t.get("kappa.canary") for t in mlflow_runs(home, "steady"))
    table = kappa("table", "steady")
    assert table.returncode == 0 and "canary" not in table.stdout, table.stderr


def test_bad_input_exits_2_and_writes_nothing(home: Path, tmp_path: Path) -> None:
    before = sorted(p.name for p in home.iterdir())
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad-one\nbackend: fake\nbase:\n  stepz: 3\naxes:\n  seed: [0]\n")
    reserved = tmp_path / "reserved.yaml"
    reserved.write_text("name: mine.canary\nbackend: fake\naxes:\n  seed: [0]\n")
    for spec in (bad, reserved):
        for args in (("canary", str(spec)), ("submit", str(spec), "--canary", "--wait")):
            proc = kappa(*args)
            assert proc.returncode == 2, proc.stdout + proc.stderr
            assert "stepz" in proc.stderr or "reserved" in proc.stderr
    assert sorted(p.name for p in home.iterdir()) == before


TINY_EMBEDDED = """\
name: tiny-canary
backend: embedded
base:
  task: addition
  benchmarks: [add-val]
  group_size: 4
  prompts_per_step: 4
  ppo_mini_batches: 2
  max_steps: 3
  val_every: 3
  val_size: 8
  eval_samples: 2
  model: {{d_model: 16, n_layers: 1, n_heads: 2}}
  warm_start: {{steps: 2, batch_size: 8, target_accuracy: null}}
axes:
  kappa:
    k1: {{reward_correct: 1.0}}
{extra}
  seed: [0, 1]
"""
# Validates, but its job fails before its first step: a folder stands where its own warm
# start (seed 7) is cached (:func:`_block_warm_start`; in life, a cache on a broken disk).
# A canary catches it in seconds instead of after a cluster's queue. (This was a learning
# rate of 1e39, which float32 cannot hold: validation refuses it now, as it refuses
# rewards and coefficients past float32.)
BROKEN = "    broken: {warm_start: {seed: 7}}"


def _block_warm_start(spec_text: str, variant: str) -> None:
    """Put a folder where ``variant``'s warm start is cached: it cannot be written."""
    from orchestrator.backends.embedded.settings import EmbeddedSettings
    from orchestrator.backends.embedded.warmstart import cache_path
    from orchestrator.grid.expand import expand
    from orchestrator.spec.loader import parse_spec

    cell = next(c for c in expand(parse_spec(spec_text, "spec.yaml")).cells
                if c.axes["kappa"] == variant)
    (cache_path(EmbeddedSettings.model_validate(cell.settings)) / "in-the-way").mkdir(
        parents=True)


def _kappa_cli() -> list[str]:
    return [sys.executable, "-m", "orchestrator"]


def test_embedded_canary_catches_a_cell_that_crashes_at_step_one(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY_EMBEDDED.format(extra=BROKEN))
    _block_warm_start(spec.read_text(), "broken")
    # In this process (the cells are processes of their own): one interpreter start less.
    ran = run_kappa(capsys, "submit", str(spec), "--canary", "--max-parallel", "2")
    out = ran.output
    assert ran.code == 2, out
    assert "2 canaries for 4 cells" in out and "1 of 2 failed" in out
    assert "kappa=broken, seed=0" in out and "Is a directory" in out  # the crash, from the log
    with Registry.open() as reg:
        assert reg.find_sweep("tiny-canary") is None
        canaries = {c.axes["kappa"]: c for c in reg.cells("tiny-canary.canary")}
    ok, broken = canaries["k1"], canaries["broken"]
    assert (ok.state, broken.state) == (CellState.SUCCEEDED, CellState.FAILED)
    assert broken.progress_step in (None, 0)  # it died before its first step
    # The passing canary took the whole path: 2 steps, a checkpoint, the final evaluation.
    assert ok.progress_step == 2 and ok.settings["max_steps"] == 2
    assert "eval/add-val/mean@1" in (ok.final_metrics or {})
    run_dir = Path(ok.run_dir or "")
    assert (run_dir / "checkpoints" / "step_2.pt").exists()
    # The passing canary built its warm start, the one seed 0's full runs will load.
    assert len([p for p in (home / "cache" / "embedded").glob("warmstart-*.pt")
                if p.is_file()]) == 1
    tags = mlflow_runs(home, "tiny-canary.canary")
    assert len(tags) == 3 and all(t.get("kappa.canary") == "true" for t in tags)


@pytest.mark.slow
def test_embedded_canaries_pass_then_the_grid_runs(home: Path, tmp_path: Path) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY_EMBEDDED.format(extra=""))
    proc = kappa("submit", str(spec), "--canary", "--wait", "--max-parallel", "2",
                 cli=_kappa_cli())
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "1 canary for 2 cells" in out and "canaries: all 1 passed" in out
    with Registry.open() as reg:
        grid = reg.cells("tiny-canary")
    assert [c.state for c in grid] == [CellState.SUCCEEDED] * 2
    assert {c.progress_step for c in grid} == {3}
    # The canary's warm start was the grid's: every RL seed starts from the same one.
    assert len(list((home / "cache" / "embedded").glob("warmstart-*.pt"))) == 1
    table = kappa("table", "tiny-canary", "--rows", "kappa", cli=_kappa_cli())
    assert table.returncode == 0, table.stderr
