"""Preflight refuses to vouch for verl cells when kappa's plug-in is missing or broken.

Each case runs preflight in a fresh process (its own compose worker, its own empty cache),
so the shared worker of test_verl_preflight.py is never disturbed. Neither case imports
verl: a missing plug-in is caught before any worker starts, a broken one by the worker's
``kappa_verl.check()`` before it imports verl.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

import orchestrator.backends.verl.preflight as pf

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("verl") is None or importlib.util.find_spec("kappa_verl") is None,
    reason="verl and kappa_verl are not installed")

ROOT = Path(__file__).resolve().parents[3]
PREFLIGHT_ONE_CELL = """
import dataclasses, json
from orchestrator.backends.verl.preflight import preflight
from orchestrator.backends.verl.settings import VerlSettings
from orchestrator.errors import UserInputError
try:
    preflight({"cell-a": VerlSettings(model_path="m", train_files="/t", val_files="/v")})
    print(json.dumps({"exit": 0}))
except UserInputError as exc:
    print(json.dumps({"exit": exc.exit_code,
                      "problems": [dataclasses.asdict(p) for p in exc.problems]}))
"""


def _preflight(tmp_path: Path, *python_args: str, **env: str) -> dict[str, Any]:
    full = {k: v for k, v in os.environ.items() if k != "KAPPA_VERL_PREFLIGHT"}
    full |= {"KAPPA_HOME": str(tmp_path / "home"), "PYTHONWARNINGS": "ignore"} | env
    out = subprocess.run([sys.executable, *python_args, "-c", PREFLIGHT_ONE_CELL],
                         capture_output=True, text=True, env=full, cwd=tmp_path, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def test_missing_plugin_is_a_user_error_with_the_install_command(tmp_path: Path) -> None:
    # -S skips site-packages' .pth files, so kappa's editable installs are not on the path;
    # the kappa root and site-packages are put back by hand: verl stays installed, the
    # plug-in (under plugins/) does not.
    site = sysconfig.get_paths()["purelib"]
    probe = subprocess.run([sys.executable, "-S", "-c",
                            "import importlib.util as u; print(u.find_spec('kappa_verl'))"],
                           env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{site}"},
                           capture_output=True, text=True, check=True, cwd=tmp_path)
    if probe.stdout.strip() != "None":
        pytest.skip("kappa_verl is installed into site-packages itself; cannot hide it")
    result = _preflight(tmp_path, "-S", PYTHONPATH=f"{ROOT}{os.pathsep}{site}")
    assert result["exit"] == 2
    [problem] = result["problems"]
    assert problem["location"] == pf.PLUGIN_LOCATION
    assert "'kappa_verl' is not importable" in problem["found"]
    assert "pip install --no-deps -e" in problem["fix"]
    assert str(ROOT / "plugins") in problem["fix"] and "kappa_verl.check()" in problem["fix"]
    assert not (tmp_path / "home" / "cache" / "verl-preflight").exists()  # nothing cached


def test_broken_plugin_is_reported_from_the_worker_check(tmp_path: Path) -> None:
    fake = tmp_path / "shadow" / "kappa_verl"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('kappa_verl deliberately broken')\n")
    result = _preflight(tmp_path, PYTHONPATH=str(fake.parent))
    assert result["exit"] == 2
    [problem] = result["problems"]
    assert problem["location"] == pf.PLUGIN_LOCATION
    assert problem["found"] == "ImportError: kappa_verl deliberately broken"
    assert "pip install --no-deps -e" in problem["fix"]
    assert not (tmp_path / "home" / "cache" / "verl-preflight").exists()


def test_install_fix_names_this_interpreter_and_the_checkout() -> None:
    fix = pf.plugin_install_fix()
    assert fix.startswith(f"`{sys.executable} -m pip install --no-deps -e {ROOT / 'plugins'}`")
