"""The spec's ``seeds:`` block: what it accepts, the cells its grid holds (and their ids,
the fixed design's), what ``kappa plan`` says, the stored plan, and every bad input at
once with its place (exit 2 through the CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.errors import Problem, UserInputError
from orchestrator.grid.plan import parse_plan, stored_plan
from orchestrator.spec import parse_spec

HEAD = ("name: s\nbackend: embedded\nbase: {max_steps: 10}\n"
        "axes:\n  baseline: [grpo, drgrpo]\n  reward_budget: [false, true]\n")
GOOD = HEAD + "seeds: {start: 3, max: 8, compare: {reward_budget: false}, margin: 0.5}\n"


def problems(text: str) -> dict[str, Problem]:
    with pytest.raises(UserInputError) as exc:
        parse_plan(text, "spec.yaml")
    return {p.location: p for p in exc.value.problems}


def test_the_grid_holds_the_first_seeds_with_the_fixed_designs_ids() -> None:
    plan = parse_plan(GOOD, "spec.yaml")
    seeds = plan.spec.seeds
    assert seeds is not None and (seeds.axis, seeds.base) == ("reward_budget", False)
    assert (seeds.alpha, seeds.spending, seeds.metric) == (0.05, "obrien-fleming", None)
    assert plan.spec.axis_names == ("baseline", "reward_budget", "seed")
    assert [c.axes["seed"] for c in plan.cells[:4]] == [0, 1, 2, 0]
    assert (plan.count, plan.max_count) == (12, 32)
    fixed = parse_plan(HEAD + "  seed: [0, 1, 2]\n", "spec.yaml")
    assert [c.cell_id for c in plan.cells] == [c.cell_id for c in fixed.cells]
    stored = stored_plan("s", plan.sweep_plan().to_json())
    assert stored.seeds == seeds and stored.axes == plan.spec.axis_names
    # A plan without the block stores and prints what it did before.
    assert "seeds" not in fixed.to_dict() and fixed.sweep_plan().seeds is None


def test_values_choose_the_seeds_and_includes_get_every_first_seed() -> None:
    plan = parse_plan(HEAD + "include: [{baseline: dapo, reward_budget: true}]\n"
                      "seeds: {start: 2, max: 3, compare: {reward_budget: true}, "
                      "values: [34, 35, 36, 37]}\n", "spec.yaml")
    assert plan.spec.seeds is not None and plan.spec.seeds.seed_values() == (34, 35, 36)
    assert sorted({c.axes["seed"] for c in plan.cells}) == [34, 35]
    assert [c.axes["seed"] for c in plan.cells if c.axes["baseline"] == "dapo"] == [34, 35]


def test_every_problem_is_located_at_once() -> None:
    found = problems("name: s\nbackend: embedded\nbase: {seed: 3}\n"
                     "axes:\n  baseline: [grpo, drgrpo]\n  reward_budget: [false, true]\n"
                     "  seed: [0, 1]\nexclude: [{seed: 1}]\n"
                     "seeds: {start: 9, max: 8, compare: {reward_budget: maybe}, alpha: 1.5, "
                     "spending: linear, values: [3, 2, 4, 5, 6, 7, 8, 9]}\n")
    assert set(found) == {"seeds.alpha", "seeds.spending", "seeds.values", "seeds.start",
                          "axes.seed", "base.seed", "exclude[0].seed",
                          "seeds.compare.reward_budget"}
    assert "start (9) is more than max (8)" in found["seeds.start"].message
    assert "ascending" in found["seeds.values"].message
    assert "obrien-fleming" in found["seeds.spending"].message  # the allowed ones
    assert found["seeds.compare.reward_budget"].allowed == "false, true"
    assert all(p.line is not None for p in found.values())  # each at its place in the file


@pytest.mark.parametrize(("block", "where", "says"), [
    ("{start: 1, max: 8, compare: {reward_budget: false}}", "seeds.start", "greater than"),
    ("{start: 3, max: 8, compare: {rb: false}}", "seeds.compare.rb", "not an axis"),
    ("{start: 3, max: 8, compare: {seed: 0}}", "seeds.compare.seed", "not an axis"),
    ("{start: 3, max: 8, compare: {reward_budget: false, baseline: grpo}}", "seeds.compare",
     "at most 1"),
    ("{start: 3, max: 8, compare: {reward_budget: false}, alpha: 0}", "seeds.alpha",
     "greater than 0"),
    ("{start: 3, max: 5, compare: {reward_budget: false}, values: [1, 2]}", "seeds.values",
     "fewer than max"),
    ("{start: 3, max: 8, compare: {reward_budget: false}, margin: -1}", "seeds.margin",
     "greater than or equal"),
    ("{start: 3, max: 8, compare: {reward_budget: false}, seed: 2}", "seeds.seed",
     "unknown key"),
])
def test_a_bad_block_is_refused_at_its_place(block: str, where: str, says: str) -> None:
    found = problems(HEAD + f"seeds: {block}\n")
    assert where in found and says in found[where].message, found


def test_a_zipped_compared_axis_or_a_search_is_refused() -> None:
    zipped = problems(HEAD.replace("[false, true]", "[false, true]\n  kl_coef: [0.0, 0.1]")
                      + "zip: [[reward_budget, kl_coef]]\n"
                        "seeds: {compare: {reward_budget: false}}\n")
    assert "zipped with kl_coef" in zipped["seeds.compare.reward_budget"].message
    searched = problems(HEAD + "seeds: {compare: {reward_budget: false}}\nsearch:\n"
                        "  space: {clip_ratio: {uniform: [0.1, 0.3]}}\n"
                        "  objective: {metric: val-core/arith-val/acc/mean@1}\n  trials: 4\n")
    assert "search:" in searched["seeds"].message


def test_max_above_the_grid_limit_is_refused_at_max(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_MAX_CELLS", "20")
    found = problems(GOOD)  # 12 cells now, 32 at max seeds
    assert "at max seeds the grid has up to 32 cells" in found["seeds.max"].message
    assert parse_spec(GOOD, "spec.yaml").seeds is not None  # the spec alone is fine


def test_kappa_plan_shows_the_first_seeds_and_the_most_it_can_cost(
        tmp_path: Path, kappa: object) -> None:
    spec = tmp_path / "seeds.yaml"
    spec.write_text(GOOD.replace("base: {max_steps: 10}", "base: {max_steps: 10}\n"
                                 "resources: {gpus: 2, hours: 1.5}"))
    code, out, _ = kappa(["plan", str(spec)])  # type: ignore[operator]
    assert code == 0
    said = " ".join(out.split())
    assert ("the cells above are seeds 0, 1, 2 of each comparison of reward_budget against "
            "false; seeds 3, 4, 5, 6, 7 are added one at a time") in said
    assert "12 cells × 2 GPUs" in said and "at most 32 cells, 96 GPU-hours" in said
    code, out, _ = kappa(["plan", str(spec), "--json"])  # type: ignore[operator]
    shown = json.loads(out)
    assert shown["count"] == 12 and shown["seeds"]["max_count"] == 32
    assert shown["seeds"]["seed_values"] == list(range(8))
    assert shown["seeds"]["max_gpu_hours"] == 96.0


@pytest.mark.parametrize(("text", "place"), [
    (GOOD.replace("max: 8", "max: 2"), "seeds.start"),
    (GOOD.replace("reward_budget: false}", "reward_budget: maybe}"),
     "seeds.compare.reward_budget"),
    (GOOD.replace("reward_budget: [false, true]\n", "reward_budget: [false, true]\n"
                  "  seed: [0, 1]\n"), "axes.seed"),
])
def test_bad_input_exits_2_through_the_cli(tmp_path: Path, kappa: object, text: str,
                                            place: str) -> None:
    spec = tmp_path / "seeds.yaml"
    spec.write_text(text)
    for command in ("validate", "plan", "submit"):
        code, out, err = kappa([command, str(spec)])  # type: ignore[operator]
        assert code == 2 and place in out + err, out + err
    assert not (tmp_path / "kappa-home" / "registry.db").exists()  # nothing written


def test_the_block_names_the_spending_functions_the_rule_has() -> None:
    from typing import get_args

    from orchestrator.spec.seeds_block import Spending
    from orchestrator.stopping.seeds import SPENDING

    assert set(get_args(Spending)) == set(SPENDING)
