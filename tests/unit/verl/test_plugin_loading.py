"""kappa_verl loads through verl's entry point, registers its estimator, and fails loudly."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("kappa_verl")


def _python(code: str, cwd: Path, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    # cwd matters: `python -c` puts it first on sys.path, ahead of PYTHONPATH.
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=300, check=False)


def test_entry_point_is_declared() -> None:
    eps = {ep.name: ep.value for ep in entry_points(group="verl.plugins")}
    assert eps.get("kappa") == "kappa_verl"


def test_plain_import_verl_registers_reward_budget(tmp_path: Path) -> None:
    out = _python("import sys, verl\n"
                  "from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY as R\n"
                  "print('kappa_verl' in sys.modules, 'reward_budget' in R)", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]


@pytest.mark.slow
def test_external_modules_fallback_without_entry_points(tmp_path: Path) -> None:
    out = _python("import sys, verl\n"
                  "from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY as R\n"
                  "print('reward_budget' in R)", tmp_path,
                  env={"VERL_USE_EXTERNAL_PLUGINS": "none",
                       "VERL_USE_EXTERNAL_MODULES": "kappa_verl"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"]


@pytest.mark.slow
def test_disabled_plugins_leave_registry_without_it(tmp_path: Path) -> None:
    """Control for the two tests above: without either hook the estimator is absent."""
    out = _python("import verl\n"
                  "from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY as R\n"
                  "print('reward_budget' in R)", tmp_path,
                  env={"VERL_USE_EXTERNAL_PLUGINS": "none", "VERL_USE_EXTERNAL_MODULES": ""})
    assert out.stdout.split() == ["False"]


def test_check_reports_facts() -> None:
    import kappa_verl

    facts = kappa_verl.check()
    assert facts["verl_version"] == "0.9.1"
    assert facts["estimator"] == "reward_budget"
    assert Path(facts["reward_function_path"]).is_file()


def test_check_rejects_malformed_entropy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import kappa_verl

    monkeypatch.setenv("KAPPA_ENTROPY_REWARD_COEF", "lots")
    with pytest.raises(kappa_verl.PluginError, match="KAPPA_ENTROPY_REWARD_COEF"):
        kappa_verl.check()


def test_broken_plugin_fails_loudly(tmp_path: Path) -> None:
    """verl hides plug-in errors at DEBUG; ours logs at ERROR and import kappa_verl exits 1."""
    fake = tmp_path / "orchestrator"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('orchestrator deliberately broken')\n")
    out = _python("import verl\nprint('verl imported', flush=True)\nimport kappa_verl",
                  tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert "verl imported" in out.stdout  # verl itself swallowed the failure ...
    assert "ERROR" in out.stderr and "kappa_verl failed to load" in out.stderr  # ... we did not
    assert "orchestrator deliberately broken" in out.stderr
    assert out.returncode != 0  # and importing the plug-in directly raises
