"""`kappa --help`, `validate`, `plan` and `schema` stay instant: no heavy import at all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "ray", "verl", "mlflow", "pandas", "sqlalchemy", "alembic", "matplotlib")

_PROBE = f"""
import atexit, sys
def report():
    loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
    sys.stderr.write("HEAVY=" + ",".join(loaded) + "\\n")
atexit.register(report)
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
