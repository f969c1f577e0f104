"""Canaries of a spec with a ``search:`` block (issue 19 point 4): one canary per study
configuration, no trials in the canary sweep, and a failed canary is a failure (exit 2),
never "all 0 passed". Real ``kappa`` runs in the test process, the fake backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit.cli import run_kappa
from kit.fake_backend import SEARCH_METRIC, search_spec
from kit.home import use_home

from orchestrator.registry import Registry

SEARCH = f"""  space:
    x: {{uniform: [0.0, 1.0]}}
  objective: {{metric: {SEARCH_METRIC}, direction: maximize}}
  trials: 2
  parallel: 2
  seed: 1
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(tmp_path / "home", monkeypatch)


def _studies(prefix: str) -> list[str]:
    import optuna

    from orchestrator.search.hook import open_storage

    with Registry.open() as reg:
        return [s.study_name for s in optuna.get_all_study_summaries(open_storage(reg.engine))
                if s.study_name.startswith(prefix)]


def test_a_search_specs_canaries_run_its_study_configurations_and_report_failure(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Four studies (variant × seed); the seeds of a variant share a canary: two canaries.
    spec = search_spec(home.parent / "s.yaml", "srch", SEARCH, steps=3, axes=(
        "{variant: {ok: {fail_at_step: 0}, broken: {fail_at_step: 1}}, seed: [0, 1]}"))
    ran = run_kappa(capsys, "canary", str(spec), "--max-parallel", "2")
    assert ran.code == 2, ran.output
    assert "2 canaries for 4 studies" in ran.output
    assert "1 of 2 failed" in ran.output and "passed" not in ran.output.replace(
        "had passed", "")
    assert "variant=broken, seed=0" in ran.output
    with Registry.open() as reg:
        canaries = reg.cells("srch.canary")
        assert reg.find_sweep("srch") is None  # the search itself was never recorded
    # The canaries ran the studies' own settings, two steps; no trial ran as a canary.
    assert sorted(c.axes["variant"] for c in canaries) == ["broken", "ok"]
    assert all(c.settings["steps"] == 2 and "kappa.study" not in c.labels for c in canaries)
    assert _studies("srch") == []

    submitted = run_kappa(capsys, "submit", str(spec), "--canary", "--wait")
    assert submitted.code == 2, submitted.output
    assert "was not submitted" in submitted.output
    with Registry.open() as reg:
        assert reg.find_sweep("srch") is None


def test_passing_canaries_of_a_search_then_the_search_runs(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = search_spec(home.parent / "s.yaml", "fine", SEARCH, steps=3,
                       axes="{seed: [0, 1]}")
    ran = run_kappa(capsys, "submit", str(spec), "--canary", "--wait")
    assert ran.code == 0, ran.output
    assert "1 canary for 2 studies" in ran.output
    assert "canaries: all 1 passed" in ran.output
    with Registry.open() as reg:
        assert len(reg.cells("fine.canary")) == 1
        trials = reg.cells("fine")
    assert len(trials) == 4 and all("kappa.study" in c.labels for c in trials)
    assert sorted(_studies("fine")) == ["fine[seed=0]", "fine[seed=1]"]


def test_canaries_no_longer_planned_do_not_run_again(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = search_spec(home.parent / "s.yaml", "chg", SEARCH, steps=3, axes=(
        "{variant: {ok: {fail_at_step: 0}, broken: {fail_at_step: 1}}}"))
    assert run_kappa(capsys, "canary", str(spec)).code == 2
    # The broken configuration is dropped from the spec: its failed canary is not the
    # new plan's, so it is not requeued and run again (unreported) with the others.
    spec = search_spec(home.parent / "s.yaml", "chg", SEARCH, steps=3,
                       axes="{variant: {ok: {fail_at_step: 0}}}")
    ran = run_kappa(capsys, "canary", str(spec))
    assert ran.code == 0 and "canaries: all 1 passed (1 had passed before" in ran.output, \
        ran.output
    with Registry.open() as reg:
        canaries = {c.axes["variant"]: c for c in reg.cells("chg.canary")}
    assert canaries["broken"].state.value == "cancelled"
    assert canaries["broken"].attempts_count == 1
