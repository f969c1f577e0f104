"""verl's own CPU tests pass with kappa's plug-in loaded (issue 11, part 2).

The suite runs in a subprocess (:mod:`verl_peer_suite`): verl's registry tests replace
its estimator registry, which must never happen in this process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("kappa_verl")

from verl_peer_suite import LEFT_OUT, PEER_FILES, run_peer_suite


def test_verl_cpu_tests_pass_with_the_plugin_loaded(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    proc = run_peer_suite(report_path)
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    report = json.loads(report_path.read_text())
    plugin = report["plugin"]
    assert plugin["loaded_by_entry_point"] and plugin["estimator_registered"], plugin
    assert plugin["estimator_module"] == "kappa_verl.estimators"
    assert {"grpo", "rloo", "gae"} <= set(plugin["builtin_estimators"])
    # Every selected file ran tests and none failed or errored.
    assert set(report["files"]) == set(PEER_FILES), report["files"]
    for name, counts in report["files"].items():
        assert counts.get("passed", 0) > 0 and set(counts) <= {"passed", "skipped"}, (
            name, counts)
    assert report["collected"] > 100 and report["failed"] == 0
    print(f"verl peer suite: {report['collected']} tests in {len(PEER_FILES)} files; "
          f"left out: {sorted(LEFT_OUT)}")


@pytest.mark.slow
def test_the_suite_refuses_to_run_without_the_plugin(tmp_path: Path) -> None:
    """The control: with verl's entry points off, no verl test runs (exit 4, the reason)."""
    report_path = tmp_path / "report.json"
    proc = run_peer_suite(report_path, "--collect-only",
                          env_overrides={"VERL_USE_EXTERNAL_PLUGINS": "none"})
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "did not load through verl's entry point" in proc.stderr
    assert not report_path.exists()
