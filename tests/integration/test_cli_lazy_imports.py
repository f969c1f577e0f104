"""`kappa --help`, `validate`, `plan` and `schema` stay instant: no heavy import at all; and
looking at a sweep whose cells all exist (a resubmit with nothing new, `status`, `table`,
`logs`) never imports MLflow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kit.fake_backend import write_spec
from kit.home import use_home
from kit.kappa_main import KAPPA_SCRIPT

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "ray", "verl", "mlflow", "pandas", "sqlalchemy", "alembic", "matplotlib")

_PROBE = f"""
import atexit, sys
def report():
    loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
    sys.stderr.write("HEAVY=" + ",".join(loaded) + "\\n")
atexit.register(report)
if len(sys.argv) > 1 and sys.argv[1] == "--fake":  # the kit's fake backends, as kit.kappa_main
    sys.argv.pop(1)
    sys.path.insert(0, "tests")
    from kit.fake_backend import ENTRIES
    from orchestrator.backends import BACKENDS
    BACKENDS.update(ENTRIES)
from orchestrator.cli.app import main
sys.argv = ["kappa", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["--version"],
    ["validate", "experiments/toy/table2.yaml"],
    ["plan", "experiments/toy/table2.yaml", "--json"],
    ["schema"],
    ["submit", "--help"],
    ["doctor", "--help"],
])
def test_light_commands_import_nothing_heavy(argv: list[str], tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False,
                          env={"KAPPA_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "HEAVY=", proc.stderr


def test_version_names_the_release_and_the_commit(tmp_path: Path) -> None:
    from orchestrator.runs.provenance import git_commit, kappa_source

    proc = subprocess.run([sys.executable, "-m", "orchestrator", "--version"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                               "KAPPA_HOME": str(tmp_path)})
    commit = (git_commit(ROOT) or "").removesuffix("-dirty")
    assert proc.stdout.startswith(f"kappa {kappa_source()['version']} (")
    assert (f"commit {commit}" if commit else "no git checkout") in proc.stdout
    assert list(tmp_path.iterdir()) == []  # it creates nothing


def test_a_recorded_sweep_is_resubmitted_and_shown_without_mlflow(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.registry import CellState, Registry
    from orchestrator.sweeps.driver import submit

    home = use_home(tmp_path / "home", monkeypatch)
    spec = write_spec(tmp_path / "s.yaml", "seen", seeds=2, steps=2)
    submit(spec, wait=True)
    with Registry.open() as reg:
        cell = reg.cells("seen")[0].cell_id
    env = {"KAPPA_HOME": str(home), "PATH": "/usr/bin:/bin",
           "KAPPA_CLI": f"{sys.executable} {KAPPA_SCRIPT}"}
    for argv in (["submit", str(spec)], ["status", "seen"], ["status"],
                 ["table", "seen", "--rows", ""], ["logs", cell]):
        proc = subprocess.run([sys.executable, "-c", _PROBE, "--fake", *argv], cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False, env=env)
        assert proc.returncode == 0, (argv, proc.stderr)
        loaded = proc.stderr.strip().splitlines()[-1].removeprefix("HEAVY=").split(",")
        assert "mlflow" not in loaded, (argv, proc.stderr)
        if argv[0] == "submit":
            assert "2 cells, 0 new, 0 requeued" in proc.stdout
    with Registry.open() as reg:  # the resubmit ran nothing again
        assert reg.counts("seen")[CellState.SUCCEEDED] == 2
