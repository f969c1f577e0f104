"""``kappa doctor`` on real stores: every check a CPU machine can exercise (issue 11, 3).

The real entry point runs in-process (``main()``); the registry is real SQLite, MLflow a
real SQLite store (and a server URL nobody listens on), the plug-in probe a fresh process
that reads verl's metadata (with ``--deep``, a real ``import verl``). The Ray check runs
against a real local Ray head (slow).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from kit.cli import kappa
from kit.home import seed_mlflow_store

from orchestrator.registry.engine import make_engine
from orchestrator.registry.schema import HEAD_REVISION, known_revisions, upgrade_schema


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run ``kappa doctor ARGS`` in-process: (exit code, stdout + stderr)."""
    return kappa(capsys, "doctor", *args)


def doctor_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out = doctor(capsys, "--json", *args)
    report = json.loads(out[out.index("{"):])
    assert report["exit_code"] == code, report
    return code, {c["name"]: c for c in report["checks"]}


def needs(package: str) -> None:
    """Skip without ``package``, without importing it (``import verl`` costs seconds)."""
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed")


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    monkeypatch.setenv("KAPPA_HOME", str(folder))
    for var in ("KAPPA_REGISTRY", "KAPPA_MLFLOW_URI", "RAY_ADDRESS", "MLFLOW_TRACKING_URI",
                "VERL_USE_EXTERNAL_MODULES", "VERL_USE_EXTERNAL_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return folder


def test_a_good_setup_passes(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Existing stores at the current schema, the plug-in installed: exit 0, and nothing
    is written to the MLflow store (no experiment, no run, not a byte)."""
    from mlflow import MlflowClient
    from mlflow.entities import ViewType

    from orchestrator.registry import Registry
    from orchestrator.tracking.tracker import Tracker

    with Registry.open(None):
        pass
    uri = f"sqlite:///{home / 'mlflow.db'}"
    Tracker(uri).client.search_experiments()
    before = {p.name: p.read_bytes() for p in home.iterdir() if p.name.startswith("mlflow.db")}
    code, checks = doctor_json(capsys, "--min-free-gib", "0")
    assert code == 0, checks
    assert list(checks) == ["python", "packages", "gpus", "plugin", "ray", "mlflow",
                            "registry", "disk"]
    assert {n for n, c in checks.items() if c["status"] == "problem"} == set()
    assert checks["registry"]["status"] == "ok"
    assert checks["registry"]["details"]["revision"] == HEAD_REVISION
    if importlib.util.find_spec("verl") is None:  # an embedded-only install
        assert checks["plugin"]["status"] == "skipped", checks["plugin"]
    else:  # installed and enabled, and it says it did not import verl
        plugin = checks["plugin"]
        assert plugin["status"] == "ok", plugin
        assert "verl not imported (--deep imports it" in plugin["summary"], plugin
        assert plugin["details"]["imported"] is False and plugin["details"]["enabled"] is True
        assert "loaded" not in plugin["details"] and "facts" not in plugin["details"]
    assert checks["ray"]["status"] == "skipped" and "RAY_ADDRESS" in checks["ray"]["summary"]
    assert checks["disk"]["status"] == "ok"
    assert checks["mlflow"]["status"] == "ok", checks["mlflow"]
    assert "current" in checks["mlflow"]["summary"], checks["mlflow"]
    assert {p.name: p.read_bytes() for p in home.iterdir()
            if p.name.startswith("mlflow.db")} == before
    client = MlflowClient(tracking_uri=uri)
    assert [e.name for e in client.search_experiments(view_type=ViewType.ALL)] == ["Default"]


def test_no_gpu_is_a_warning_not_a_problem(home: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Embedded users train on CPU: a machine without a GPU is ready for them."""
    import torch

    if torch.cuda.is_available():
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, checks = doctor_json(capsys, "--check", "gpus")
    assert code == 0
    assert checks["gpus"]["status"] == "warning"
    assert "embedded backend" in checks["gpus"]["summary"]
    assert checks["gpus"]["fix"]


def test_a_new_machine_passes_and_nothing_is_created(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, checks = doctor_json(capsys, "--check", "mlflow", "--check", "registry",
                               "--check", "disk", "--min-free-gib", "0")
    assert code == 0, checks
    assert "does not exist yet" in checks["registry"]["summary"]
    assert "does not exist yet" in checks["mlflow"]["summary"]
    assert not home.exists(), tree(home)
    assert tree(home.parent) == []


@pytest.mark.parametrize(("revision", "words"), [("0000old", "mlflow db upgrade"),
                                                 (None, "not an MLflow store")])
def test_a_local_mlflow_store_of_another_schema_is_a_problem(
        home: Path, capsys: pytest.CaptureFixture[str], revision: str | None,
        words: str) -> None:
    import sqlite3

    db = home / "mlflow.db"
    seed_mlflow_store(home)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE alembic_version" if revision is None else
                     f"UPDATE alembic_version SET version_num = '{revision}'")
    code, checks = doctor_json(capsys, "--check", "mlflow")
    assert code == 2 and checks["mlflow"]["status"] == "problem", checks
    assert words in checks["mlflow"]["summary"] + (checks["mlflow"]["fix"] or ""), checks


def test_unreachable_mlflow_server_is_a_problem(home: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from ray_head import free_port

    url = f"http://127.0.0.1:{free_port()}"
    code, out = doctor(capsys, "--mlflow", url, "--check", "mlflow")
    assert code == 2, out
    assert "problem" in out and "unreachable" in out and "mlflow server" in out, out
    assert "Traceback" not in out


def test_an_old_registry_is_a_problem_with_the_fix(home: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{home.parent / 'old.db'}"
    engine = make_engine(url)
    older = known_revisions()[-2]
    upgrade_schema(engine, older)
    engine.dispose()
    code, checks = doctor_json(capsys, "--registry", url, "--check", "registry")
    assert code == 2
    registry = checks["registry"]
    assert registry["status"] == "problem" and older in registry["summary"]
    assert registry["fix"] == f"kappa db upgrade --registry '{url}'"
    # The human table says the same, and the fix is the real command: it works.
    code, out = doctor(capsys, "--registry", url, "--check", "registry")
    assert code == 2 and "kappa db upgrade" in out and "not ready" in out, out
    code, out = kappa(capsys, "db", "upgrade", "--registry", url)
    assert code == 0, out
    code, checks = doctor_json(capsys, "--registry", url, "--check", "registry")
    assert code == 0 and checks["registry"]["details"]["revision"] == HEAD_REVISION


def test_a_missing_plugin_is_a_problem(home: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """verl installed, but no ``verl.plugins`` entry point for kappa_verl."""
    needs("verl")
    real = importlib.metadata.entry_points

    def without_kappa(**params: Any) -> Any:
        found: Any = real(**params)
        if params.get("group") == "verl.plugins":
            return importlib.metadata.EntryPoints(
                ep for ep in found if not ep.value.startswith("kappa_verl"))
        return found

    monkeypatch.setattr(importlib.metadata, "entry_points", without_kappa)
    code, checks = doctor_json(capsys, "--check", "plugin")
    assert code == 2
    assert checks["plugin"]["status"] == "problem"
    assert "no 'verl.plugins' entry point" in checks["plugin"]["summary"]
    assert "pip install" in checks["plugin"]["fix"]


def test_a_python_without_verl_and_the_plugin_is_a_problem(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--python``: the interpreter cells would run, here the venv's base Python."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    if not base.exists() or sys.prefix == sys.base_prefix:
        pytest.skip("not in a virtual environment: no interpreter without its packages")
    code, checks = doctor_json(capsys, "--check", "plugin", "--python", str(base))
    plugin = checks["plugin"]
    if plugin["details"].get("verl"):
        pytest.skip(f"{base} has verl installed")
    assert code == 2 and plugin["status"] == "problem", plugin
    assert "No module named 'verl'" in plugin["summary"] and "pip install" in plugin["fix"]
    assert plugin["details"]["importable"] is False


def test_deep_imports_verl_as_a_run_does(home: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    """``--deep``: a real ``import verl`` loads the plug-in, which answers its check."""
    needs("verl")
    code, checks = doctor_json(capsys, "--check", "plugin", "--deep")
    plugin = checks["plugin"]
    assert code == 0 and plugin["status"] == "ok", plugin
    assert "loaded by verl" in plugin["summary"] and "not imported" not in plugin["summary"]
    assert plugin["details"]["imported"] is True and plugin["details"]["loaded"] is True
    assert plugin["details"]["facts"]["estimator"] == "reward_budget"


@pytest.mark.parametrize(("policy", "deep"), [
    ("none", False), ("other,another", False), pytest.param("none", True, marks=pytest.mark.slow)])
def test_a_plugin_verl_does_not_load_is_a_problem(
        home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        policy: str, deep: bool) -> None:
    """Installed, but verl is told to load no plug-ins (or only others): verl's policy
    read says it would not load it; the real ``import verl`` (``--deep``) shows it."""
    needs("verl")
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", policy)
    code, checks = doctor_json(capsys, "--check", "plugin", *(["--deep"] if deep else []))
    assert code == 2
    words = "did not load kappa_verl" if deep else "would not load kappa_verl"
    assert words in checks["plugin"]["summary"], checks["plugin"]
    assert "VERL_USE_EXTERNAL_PLUGINS" in checks["plugin"]["fix"]


def test_an_unknown_check_is_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = doctor(capsys, "--check", "gpu")
    assert code == 2 and "no check named 'gpu'" in out and "gpus" in out, out


@pytest.mark.ray
def test_an_unreachable_ray_dashboard_is_a_problem(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    needs("ray")
    from ray_head import free_port

    code, checks = doctor_json(capsys, "--check", "ray", "--ray-address",
                               f"http://127.0.0.1:{free_port()}")
    assert code == 2 and "cannot reach the Ray dashboard" in checks["ray"]["summary"], checks


@pytest.mark.slow
@pytest.mark.ray
def test_ray_workers_have_the_plugin(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real local Ray head: its GPUs (none: a warning) and the plug-in in a worker."""
    needs("ray")
    needs("verl")
    from ray_head import local_ray_head

    with local_ray_head() as address:
        code, checks = doctor_json(capsys, "--check", "ray", "--ray-address", address,
                                   "--python", sys.executable, "--deep")
    ray = checks["ray"]
    assert code == 0, ray
    assert ray["status"] == "warning" and "no GPUs" in ray["summary"], ray
    workers = ray["details"]["workers"]
    assert len(workers) == ray["details"]["nodes"] == 1
    assert workers[0]["loaded"] is True and workers[0]["python"] == sys.executable


def test_an_unreachable_registry_server_is_a_problem(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ray_head import free_port

    url = f"postgresql://kappa:secret@127.0.0.1:{free_port()}/kappa"
    code, out = doctor(capsys, "--registry", url, "--check", "registry", "--json")
    assert code == 2, out
    registry = json.loads(out[out.index("{"):])["checks"][0]
    assert registry["status"] == "problem" and "cannot connect" in registry["summary"]
    assert "secret" not in out and "Traceback" not in out


@pytest.mark.slow
def test_a_real_mlflow_server_is_read_not_written(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through HTTP: ok while the server runs (read only: no experiment made), a problem
    once it is stopped."""
    from kit.mlflow_ui import mlflow_server, stop, wait_until_up
    from mlflow import MlflowClient
    from mlflow.entities import ViewType
    from ray_head import free_port

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    proc = mlflow_server(f"sqlite:///{tmp_path / 'server.db'}", tmp_path / "art", port, log)
    try:
        wait_until_up(base, proc, log)
        code, checks = doctor_json(capsys, "--mlflow", base, "--check", "mlflow")
        assert code == 0 and checks["mlflow"]["status"] == "ok", checks
        client = MlflowClient(tracking_uri=base)
        assert [e.name for e in client.search_experiments(view_type=ViewType.ALL)] == [
            "Default"]
    finally:
        stop(proc)
    code, checks = doctor_json(capsys, "--mlflow", base, "--check", "mlflow")
    assert code == 2 and "unreachable" in checks["mlflow"]["summary"], checks


@pytest.mark.parametrize(("found", "status", "words"), [
    ({"error": "ImportError: boom"}, "problem", "ImportError: boom"),
    ({"importable": False, "entry_point": False, "loaded": False}, "problem", "not installed"),
    ({"importable": True, "entry_point": False, "loaded": False}, "problem", "no 'verl.plugins'"),
    ({"importable": True, "entry_point": True, "imported": True, "loaded": False,
      "external_plugins": "none"}, "problem", "did not load kappa_verl"),
    ({"importable": True, "entry_point": True, "imported": True, "loaded": True,
      "verl": "0.9.1"}, "ok", "loaded by verl 0.9.1's entry point"),
    ({"importable": True, "entry_point": True, "imported": False, "enabled": False,
      "external_plugins": "none"}, "problem", "would not load kappa_verl"),
    ({"importable": True, "entry_point": True, "imported": False, "enabled": True,
      "verl": "0.9.1"}, "ok", "verl 0.9.1 and kappa_verl installed, its entry point enabled; "
     "verl not imported (--deep imports it"),
])
def test_probe_verdicts(found: dict[str, Any], status: str, words: str) -> None:
    """Every way a probe (here or in a Ray worker) can come back, judged."""
    from orchestrator.doctor.plugin import verdict

    got, summary, fix = verdict(found, "node n1")
    assert got.value == status and words in summary and summary.startswith("node n1: ")
    assert (fix is None) == (status == "ok")
