"""verl's own CPU tests, run with kappa's plug-in loaded: a peer suite (issue 11, part 2).

The verl 0.9.1 wheel ships its test package (``tests/`` in site-packages, listed in the
wheel's RECORD). :data:`PEER_FILES` are the ones about what the plug-in touches: the
advantage estimators and their registry, the policy losses, loss aggregation, the V1
trainer's advantage path, metrics and ``DataProto``. They run in a pytest subprocess
(never in ours: verl's ``TestRegisterAdvEst.setUp`` replaces the estimator registry)
with this module as a pytest plug-in (``-p verl_peer_suite``). Before any verl test is
collected it imports verl the ordinary way and refuses to go on (exit 4) unless verl's
``verl.plugins`` entry point loaded ``kappa_verl`` and ``reward_budget`` is registered
next to verl's built-in estimators; at the end it writes a JSON report (files, outcomes,
plug-in facts) to ``$KAPPA_PEER_REPORT``.

Run by hand: ``.venv/bin/python tests/integration/verl_peer_suite.py [pytest args]``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

REPORT_ENV = "KAPPA_PEER_REPORT"
ESTIMATOR = "reward_budget"
# Relative to verl's ``tests`` package; each about code the plug-in sits next to.
PEER_FILES: dict[str, str] = {
    "trainer/ppo/test_core_algos_on_cpu.py":
        "advantage estimators (GRPO, RLOO, GAE, ...), their registry, policy losses",
    "trainer/ppo/test_dynamic_policy_losses_on_cpu.py": "the policy-loss registry and modes",
    "trainer/ppo/test_loss_aggregation_on_cpu.py": "agg_loss / loss_agg_mode",
    "trainer/ppo/test_value_loss_normalization_on_cpu.py": "value-loss normalisation",
    "trainer/ppo/test_reinforce_pp_multiturn_on_cpu.py": "REINFORCE++ / GAE, multi-turn masks",
    "trainer/ppo/test_metric_utils_on_cpu.py": "training and validation metrics (acc, reward)",
    "trainer/ppo/test_rollout_moe_lb_metrics_on_cpu.py": "rollout metrics",
    "trainer/ppo/test_spec_decode_metrics_on_cpu.py": "rollout metrics",
    "trainer/ppo/test_rollout_corr.py": "rollout importance weights into the policy loss",
    "trainer/ppo/test_rollout_corr_integration.py": "rollout correction with the vanilla loss",
    "trainer/test_multi_trajectories_advantage_on_cpu.py":
        "the V1 trainer's advantage path (compute_advantage_for_multi_trajectories)",
    "trainer/test_constants_ppo_on_cpu.py": "trainer constants / env",
    "test_protocol_on_cpu.py": "DataProto",
    "test_protocol_v2_on_cpu.py": "the TensorDict protocol of the V1 trainer",
    "test_base_config_on_cpu.py": "verl's config dataclasses",
}
# Everything else in the wheel's tests package, and why it is not in the peer suite.
LEFT_OUT: dict[str, str] = {
    "single_controller/*_on_cpu.py": "Ray worker groups and placement, not the algorithms; "
        "each test starts a Ray cluster (minutes on 2 cores). The plug-in in Ray workers "
        "is tested by test_verl_ray_workers.py",
    "checkpoint_engine/*_on_cpu.py": "checkpoint and weight-sync engines (FSDP LoRA, "
        "SGLang buckets); the plug-in touches neither",
    "experimental/agent_loop/*_on_cpu.py": "the rollout side (agent loop, tool parsers, "
        "audio/multimodal), which the plug-in does not touch",
    "tools/*_on_cpu.py": "tool calling in rollouts",
    "experimental/fully_async_policy/*_on_cpu.py": "the fully-async trainer's config",
    "test_serial_utils*_on_cpu.py": "not verl's: TransferQueue's wheel installs them into "
        "the same top-level tests package",
    "**/test_*.py (other)": "GPU/NPU, multi-process or e2e tests (verl's CPU tests are the "
        "*_on_cpu.py files), or they need vLLM/SGLang, model downloads or the network",
}


def verl_tests_dir() -> Path:
    """The ``tests`` package the verl wheel installed (checked against its RECORD)."""
    dist = importlib.metadata.distribution("verl")
    owned = {str(f) for f in dist.files or ()}
    missing = [name for name in PEER_FILES if f"tests/{name}" not in owned]
    if missing:
        raise FileNotFoundError(f"verl {dist.version}'s wheel ships none of {missing}")
    return Path(str(dist.locate_file("tests"))).resolve()


def run_peer_suite(report: Path, *pytest_args: str, timeout: float = 900,
                   env_overrides: dict[str, str] | None = None,
                   ) -> subprocess.CompletedProcess[str]:
    """Run :data:`PEER_FILES` in a new pytest process with this plug-in; report to ``report``.

    The subprocess runs in an empty folder with an empty ini file, so neither kappa's
    pytest settings nor its ``tests`` folder get in the way; its rootdir is the folder
    holding verl's ``tests`` (node ids ``tests/trainer/...``; nothing is written there).
    The plug-in must come through verl's entry point, so kappa's fallback variables are
    removed from its env.
    """
    root = verl_tests_dir()
    with tempfile.TemporaryDirectory(prefix="kappa-peer-") as work:
        (Path(work) / "pytest.ini").write_text("[pytest]\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(
            ("VERL_USE_EXTERNAL_", "PYTEST_", "COV_"))}
        env.update({REPORT_ENV: str(report), "PYTHONPATH": str(Path(__file__).parent),
                    "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"})
        env.update(env_overrides or {})
        argv = [sys.executable, "-m", "pytest", "-c", str(Path(work) / "pytest.ini"),
                "--rootdir", str(root.parent), "-p", "no:cacheprovider", "-p", "no:xdist",
                "-p", "verl_peer_suite", "-q", "-W", "ignore",
                *pytest_args, *(str(root / name) for name in PEER_FILES)]
        return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)


# --- the pytest plug-in, active only in the subprocess (``-p verl_peer_suite``) ---------

_facts: dict[str, Any] = {}
_outcomes: dict[str, Counter[str]] = {}


def plugin_facts() -> dict[str, Any]:
    """Import verl as a user would; what it loaded. Raises if the plug-in is not in."""
    import verl
    from verl.trainer.ppo import core_algos

    loaded_by_entry_point = "kappa_verl" in sys.modules  # nothing here imported it
    entry_points = {ep.name: ep.value
                    for ep in importlib.metadata.entry_points(group="verl.plugins")}
    registry = dict(core_algos.ADV_ESTIMATOR_REGISTRY)
    facts = {"verl_version": str(verl.__version__), "entry_points": entry_points,
             "loaded_by_entry_point": loaded_by_entry_point,
             "estimator_registered": ESTIMATOR in registry,
             "estimator_module": getattr(registry.get(ESTIMATOR), "__module__", None),
             "builtin_estimators": sorted(set(registry) - {ESTIMATOR})}
    if not (loaded_by_entry_point and facts["estimator_registered"]):
        raise pytest.UsageError(f"kappa's verl plug-in did not load through verl's entry "
                                f"point: {json.dumps(facts)}")
    import kappa_verl

    facts["plugin_check"] = kappa_verl.check()
    return facts


def pytest_configure(config: pytest.Config) -> None:
    """Load the plug-in before any verl test module is imported (collection)."""
    _facts.update(plugin_facts())


def pytest_report_header(config: pytest.Config) -> str:
    return (f"kappa peer suite: verl {_facts['verl_version']}, kappa_verl loaded by the "
            f"verl.plugins entry point, '{ESTIMATOR}' registered")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or report.outcome != "passed":
        _outcomes.setdefault(report.nodeid.split("::", 1)[0], Counter())[report.outcome] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    files = {name.removeprefix("tests/"): dict(counts) for name, counts in _outcomes.items()}
    Path(path).write_text(json.dumps({
        "exitstatus": int(exitstatus), "plugin": _facts, "files": files,
        "collected": session.testscollected, "failed": session.testsfailed}, indent=2))


if __name__ == "__main__":
    out = Path(tempfile.mkdtemp(prefix="kappa-peer-")) / "report.json"
    proc = run_peer_suite(out, *sys.argv[1:])
    sys.stdout.write(proc.stdout[-6000:] + proc.stderr[-3000:])
    sys.stdout.write(f"\nreport: {out}\n")
    sys.exit(proc.returncode)
