"""Commands that only read create nothing; sweep names cannot lead outside KAPPA_HOME.

The real ``kappa`` entry point runs in-process (``main()`` with its error handling), so
each command costs milliseconds after the first imports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kit.cli import kappa

READ_ONLY = [
    ("status",), ("status", "toy"), ("status", "--json"), ("logs", "abc123"),
    ("cancel", "toy"), ("resume", "toy"), ("resume", "toy", "--wait"), ("table", "toy"),
    ("export", "toy"), ("report", "toy"), ("convergence", "toy"), ("ui",), ("ui", "toy"),
]


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    for var in ("KAPPA_REGISTRY", "KAPPA_MLFLOW_URI", "KAPPA_CACHE"):
        monkeypatch.delenv(var, raising=False)
    return folder


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_read_only_commands_create_no_home(args: tuple[str, ...], cwd: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    home = cwd.parent / "no-such-home"
    monkeypatch.setenv("KAPPA_HOME", str(home))
    code, out = kappa(capsys, *args)
    assert code == 2, out
    assert "Traceback" not in out
    assert "no kappa registry" in out or "no MLflow store" in out or "no results" in out, out
    assert not home.exists(), tree(home)
    assert tree(cwd) == []


def test_read_only_commands_leave_an_existing_home_alone(
        cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    home = cwd.parent / "home"
    home.mkdir()
    monkeypatch.setenv("KAPPA_HOME", str(home))
    for args in READ_ONLY:
        code, out = kappa(capsys, *args)
        assert code == 2, (args, out)
    assert tree(home) == []
    code, out = kappa(capsys, "db", "current")
    assert code == 0 and "missing" in out, out
    assert tree(home) == []


def _run_folder(folder: Path, cell: str, value: float) -> None:
    run = folder / cell
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps(
        {"status": "succeeded", "final": {"eval/toy/mean@4": value}}))


@pytest.mark.parametrize("args", [
    ("export", "../../outside"), ("export", "../../outside", "-o", "x.csv"),
    ("table", "../../outside"), ("convergence", "../../outside"), ("report", "../../outside"),
    ("report", "a/b"), ("export", ".."), ("export", "a\x00b"), ("status", "../x"),
    ("resume", "../x"), ("ui", "../x"), ("export", "x" * 201),
], ids=lambda a: " ".join(a).replace("\x00", "NUL")[:40])
def test_sweep_names_cannot_leave_kappa_home(args: tuple[str, ...], cwd: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    home = cwd.parent / "home"
    monkeypatch.setenv("KAPPA_HOME", str(home))
    _run_folder(home / "runs" / "inside", "c1", 0.25)
    # What ``runs/../../outside`` would reach: a run folder outside KAPPA_HOME.
    _run_folder(cwd.parent / "outside", "c9", 0.75)
    before = tree(cwd.parent)
    code, out = kappa(capsys, *args)
    assert code == 2, out
    assert "invalid sweep name" in out and "Traceback" not in out, out
    assert "0.75" not in out
    assert tree(cwd.parent) == before  # nothing written anywhere (no report, no csv)


def test_a_plain_name_still_reads_its_run_folders(cwd: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the same command with a valid name reads the run folder."""
    home = cwd.parent / "home"
    monkeypatch.setenv("KAPPA_HOME", str(home))
    _run_folder(home / "runs" / "inside", "c1", 0.25)
    code, out = kappa(capsys, "export", "inside", "--format", "json")
    assert code == 0, out
    assert json.loads(out[out.index("["):])[0]["cell_id"] == "c1"
    assert not (home / "registry.db").exists() and not (home / "mlflow.db").exists()


def test_a_spec_name_with_a_path_is_refused_at_validate(
        cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = cwd / "evil.yaml"
    spec.write_text("name: ../evil\nbackend: embedded\naxes:\n  seed: [0]\n")
    code, out = kappa(capsys, "validate", str(spec))
    assert code == 2 and "name" in out and "not a valid name" in out, out


@pytest.mark.parametrize("args", [
    ("status", "\udcff"), ("status", "\udcff", "--json"), ("table", "\udcff"),
    ("report", "\udcff"), ("export", "\udcff"), ("convergence", "\udcff"),
    ("logs", "\udcff"), ("cancel", "\udcff"), ("resume", "\udcff"), ("ui", "\udcff"),
], ids=lambda a: " ".join(a).replace("\udcff", "0xff"))
def test_a_name_that_is_no_utf8_is_refused(args: tuple[str, ...], cwd: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``kappa status $'\\xff'``: Python hands the byte over as a lone surrogate, which
    neither the registry nor a file name can encode (issue 19, 6): exit 2, not a
    UnicodeEncodeError, with the registry there to be queried."""
    home = cwd.parent / "home"
    monkeypatch.setenv("KAPPA_HOME", str(home))
    monkeypatch.delenv("KAPPA_FULL_ERROR", raising=False)
    assert kappa(capsys, "db", "upgrade")[0] == 0
    (home / "mlflow.db").touch()  # `kappa ui` looks for the sweep once a store is there
    code, out = kappa(capsys, *args)
    assert code == 2 and "Traceback" not in out, out
    assert "name '\\udcff'" in out and "UTF-8 text" in out, out
