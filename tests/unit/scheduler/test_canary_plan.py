"""Which canaries a grid gets, and what an embedded canary runs (no process started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.backends import get_backend
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.rl_settings import canary_intervention_steps
from orchestrator.errors import UserInputError
from orchestrator.grid.identity import content_id
from orchestrator.sweeps.canary import CanaryPlan, describe_changes, plan_canaries
from orchestrator.sweeps.submission import prepare

SPEC = """\
name: plan-canaries
backend: embedded
base: {task: addition, max_steps: 40, prompts_per_step: 8, ppo_mini_batches: 2}
axes:
  baseline: [grpo, dapo]
  length: {short: {max_steps: 40}, long: {max_steps: 80}}
  seed: [0, 1, 2]
"""


def _plan(tmp_path: Path, text: str = SPEC) -> CanaryPlan:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    return plan_canaries(prepare(spec, models=True))


def test_cells_differing_in_seed_or_only_in_length_share_a_canary(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    assert plan.name == "plan-canaries.canary"
    assert len(plan.grid.cells) == 12
    # seed is free; 40 and 80 steps both become a 2-step canary: one per baseline.
    assert [c.cell.axes["baseline"] for c in plan.canaries] == ["grpo", "dapo"]
    for canary in plan.canaries:
        assert len(canary.stands_for) == 6
        assert canary.cell.axes == canary.stands_for[0].axes  # the first cell is run
        assert canary.cell.settings["max_steps"] == 2
        assert canary.changes["max_steps"] == (40, 2)
        assert canary.changes["prompts_per_step"] == (8, 2)
    assert "max_steps 40→2" in describe_changes(plan.canaries[0].changes)
    sweep = plan.sweep()
    assert (sweep.name, sweep.spec.retries) == ("plan-canaries.canary", 0)
    assert {c.cell_id for c in sweep.cells}.isdisjoint(c.cell_id for c in plan.grid.cells)


def test_grid_and_canary_cells_carry_the_resolved_settings_their_ids_hash(
        tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    backend = get_backend("embedded")
    cells = [*plan.grid.cells, *(c.cell for c in plan.canaries)]
    for cell in cells:  # what the registry stores and the job runs: no default left out
        assert cell.settings == backend.validate(cell.settings).model_dump(mode="json")
        assert content_id("embedded", cell.settings, cell.labels) == cell.cell_id
    assert "clip_ratio" in cells[0].settings  # a default the spec never wrote


def test_planning_twice_gives_the_same_canary_ids(tmp_path: Path) -> None:
    first = [c.cell.cell_id for c in _plan(tmp_path).canaries]
    assert [c.cell.cell_id for c in _plan(tmp_path).canaries] == first


def test_canary_sweep_names_are_reserved(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="reserved"):
        _plan(tmp_path, SPEC.replace("name: plan-canaries", "name: mine.canary"))


@pytest.mark.parametrize("command", ["validate", "plan", "submit", "canary", "search"])
def test_a_reserved_name_is_refused_by_every_command_that_reads_a_spec(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        command: str) -> None:
    """A name ending as kappa's own sweeps do would be taken for one (a ``.canary`` sweep's
    end is never posted): refused in the file and as an override, where `validate` and
    `plan` used to say it was fine."""
    from kit.cli import user_error

    from orchestrator.paths import RESERVED_SUFFIXES

    monkeypatch.setenv("KAPPA_HOME", str(tmp_path / "home"))
    good = tmp_path / "good.yaml"
    good.write_text(SPEC)
    for suffix in RESERVED_SUFFIXES:
        named = tmp_path / "named.yaml"
        named.write_text(SPEC.replace("name: plan-canaries", f"name: mine{suffix}"))
        for args in ([str(named)], [str(good), f"name=mine{suffix}"]):
            error = user_error(capsys, command, *args)
            assert [p.location.removeprefix("override 1: ") for p in error.problems] == [
                "name"], error.problems
    assert not (tmp_path / "home").exists()  # refused before anything is written


def test_a_search_gets_one_canary_per_study_configuration_and_no_search(
        tmp_path: Path) -> None:
    text = SPEC.replace("name: plan-canaries", "name: searched") + (
        "search:\n  space: {kl_coef: {loguniform: [1.0e-4, 1.0e-1]}}\n"
        "  objective: {metric: val-core/add-val/acc/mean@1}\n  trials: 4\n")
    plan = _plan(tmp_path, text)
    assert plan.is_search and plan.grid.cells == ()  # a search's cells are its trials
    # 12 studies (baseline × length × seed): one canary per baseline, as for the grid.
    assert [c.cell.axes["baseline"] for c in plan.canaries] == ["grpo", "dapo"]
    assert [len(c.stands_for) for c in plan.canaries] == [6, 6]
    assert plan.canaries[0].cell.settings["max_steps"] == 2
    sweep = plan.sweep()
    assert sweep.spec.search is None and sweep.plan.search is None and not sweep.plan.studies
    assert len(sweep.cells) == 2


def test_embedded_canary_keeps_the_warm_start_its_full_run_loads() -> None:
    from orchestrator.backends.embedded.warmstart import cache_key

    backend = get_backend("embedded")
    raw = {"task": "addition", "seed": 3, "max_steps": 300, "prompts_per_step": 64,
           "ppo_mini_batches": 4, "val_size": 64, "warm_start": {"steps": 50},
           "entropy_intervention": "entropy_loss", "intervention_steps": 100}
    canary = backend.canary_settings(raw, backend.validate(raw))
    assert {k: canary[k] for k in ("max_steps", "prompts_per_step", "eval_samples",
                                   "intervention_steps")} == {
        "max_steps": 2, "prompts_per_step": 4, "eval_samples": 1, "intervention_steps": 1}
    full, short = EmbeddedSettings.model_validate(raw), EmbeddedSettings.model_validate(canary)
    assert cache_key(short) == cache_key(full)
    assert short.val_size == full.val_size  # held out of the warm start's training data
    # Settings it does not change stay as given (no defaults written in).
    assert set(canary) == set(raw) | {"eval_samples"}


@pytest.mark.parametrize(("steps", "max_steps", "expected"), [
    (None, 1000, None),  # on for the whole run
    (0, 1000, 0),  # never on
    (500, 1000, 1),  # two phases stay two phases
    (1000, 1000, 2),  # on until the end
    (5000, 1000, 2),
])
def test_intervention_steps_of_a_canary(steps: int | None, max_steps: int,
                                        expected: int | None) -> None:
    assert canary_intervention_steps(steps, max_steps, 2) == expected


def test_a_seeds_on_demand_spec_gets_a_canary_sweep_that_adds_no_seeds(tmp_path: Path) -> None:
    plan = _plan(tmp_path, SPEC.replace("  seed: [0, 1, 2]\n", "")
                 + "seeds: {start: 2, max: 5, compare: {baseline: grpo}}\n")
    assert len(plan.grid.cells) == 8 and plan.grid.plan.seeds is not None
    sweep = plan.sweep()
    assert sweep.plan.seeds is None and sweep.spec.seeds is None  # its cells, and no more
    assert [c.cell.axes["seed"] for c in plan.canaries] == [0, 0]
