"""Expansion: order, zips, exclusions, includes, ids, settings errors at their origin."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.backends import get_backend
from orchestrator.errors import UserInputError
from orchestrator.grid import content_id, expand, plan
from orchestrator.spec import load_spec, parse_spec

REPO = Path(__file__).resolve().parents[3]

SWEEP = """\
name: sweep
backend: embedded
base:
  max_steps: 50
axes:
  baseline: [grpo, gspo, dapo]
  kappa:
    k5000: {reward_correct: 5, reward_incorrect: 0, kl_coef: 0.001}
    k200:  {reward_correct: 1, reward_incorrect: 0, kl_coef: 0.005}
  clip_ratio: [0.2, 0.3]
  clip_label: [lo, hi]
  seed: [0, 1]
labels: [clip_label]
zip:
  - [clip_ratio, clip_label]
exclude:
  - {baseline: gspo, kappa: k200}
include:
  - {baseline: grpo, kappa: k5000, clip_ratio: 0.2, clip_label: lo, seed: 7}
  - {baseline: grpo, kappa: k5000, clip_ratio: 0.2, clip_label: lo, seed: 1}
resources: {gpus: 8, nodes: 2, hours: 1.5}
"""


def problems_of(exc: pytest.ExceptionInfo[UserInputError]) -> list[str]:
    return [p.render() for p in exc.value.problems]


def test_toy_table2_has_36_cells_baseline_slowest_seed_fastest(coupling: str) -> None:
    grid = expand(load_spec(REPO / "experiments/toy/table2.yaml"))
    assert len(grid) == 36
    assert [c.axes["baseline"] for c in grid.cells[:6]] == ["grpo"] * 6
    assert [c.axes["reward_budget"] for c in grid.cells[:6]] == [False] * 3 + [True] * 3
    assert [c.axes["seed"] for c in grid.cells[:6]] == [0, 1, 2] * 2
    assert [c.index for c in grid.cells] == list(range(36))
    assert len({c.cell_id for c in grid.cells}) == 36
    assert grid.cells[10].settings == {
        "task": "arithmetic",
        "group_size": 8,
        "prompts_per_step": 32,
        "max_steps": 100,
        "baseline": "drgrpo",
        "reward_budget": True,
        "seed": 1,
    }


def test_order_zip_exclude_include(coupling: str) -> None:
    grid = expand(parse_spec(SWEEP, "sweep.yaml"))
    # 3 baselines × 2 kappa × 2 (zipped clip) × 2 seeds = 24, minus 4 (gspo, k200), plus
    # one new include (seed 7); the seed-1 include already exists.
    assert len(grid) == 24 - 4 + 1
    first = grid.cells[0]
    assert list(first.axes) == ["baseline", "kappa", "clip_ratio", "clip_label", "seed"]
    assert [
        (c.axes["clip_ratio"], c.axes["clip_label"], c.axes["seed"]) for c in grid.cells[:4]
    ] == [(0.2, "lo", 0), (0.2, "lo", 1), (0.3, "hi", 0), (0.3, "hi", 1)]
    assert not any(c.axes["baseline"] == "gspo" and c.axes["kappa"] == "k200" for c in grid)
    assert grid.cells[-1].axes["seed"] == 7
    assert first.labels == {"clip_label": "lo"}
    assert first.settings["kl_coef"] == 0.001 and "clip_label" not in first.settings


def test_fast_ids_equal_the_definition(coupling: str) -> None:
    grid = expand(parse_spec(SWEEP, "sweep.yaml"))
    backend = get_backend("embedded")
    for cell in grid:
        dump = backend.validate(cell.settings).model_dump(mode="json")
        assert cell.cell_id == content_id("embedded", dump, cell.labels)


def test_ids_ignore_spelling_and_key_order_and_are_shared_across_specs() -> None:
    a = parse_spec(
        "name: a\nbase: {kl_coef: 0.001, max_steps: 50}\naxes:\n  seed: [0, 1]\n", "a.yaml"
    )
    b = parse_spec(
        "name: b\naxes:\n  seed: [1, 5]\nbase: {max_steps: 50, kl_coef: 1e-3}\n", "b.yaml"
    )
    ids_a = {c.axes["seed"]: c.cell_id for c in expand(a)}
    ids_b = {c.axes["seed"]: c.cell_id for c in expand(b)}
    assert ids_a[1] == ids_b[1]
    assert ids_a[0] != ids_a[1] != ids_b[5]


def test_label_is_part_of_identity() -> None:
    plain = expand(parse_spec("name: a\naxes:\n  seed: [0]\n", "a.yaml")).cells[0]
    labelled = expand(
        parse_spec("name: a\naxes:\n  seed: [0]\n  note: [x]\nlabels: [note]\n", "a.yaml")
    ).cells[0]
    assert plain.settings == labelled.settings
    assert plain.cell_id != labelled.cell_id


def test_settings_errors_reported_once_at_their_origin(coupling: str) -> None:
    text = """\
name: bad
base:
  kl_coef: -1
axes:
  baseline: [grpo, gspo, dapo]
  kappa:
    good: {reward_correct: 1}
    typo: {kl_coeff: 0.1}
  seed: [0, x, 2]
"""
    with pytest.raises(UserInputError) as exc:
        expand(parse_spec(text, "bad.yaml"))
    rendered = problems_of(exc)
    assert len(rendered) == 3, rendered
    by_location = {p.location: p for p in exc.value.problems}
    assert set(by_location) == {"base.kl_coef", "axes.kappa.typo.kl_coeff", "axes.seed[1]"}
    assert (by_location["base.kl_coef"].line, by_location["base.kl_coef"].column) == (3, 3)
    typo = by_location["axes.kappa.typo.kl_coeff"]
    assert (typo.file, typo.line) == ("bad.yaml", 8)
    assert typo.fix == "did you mean 'kl_coef'?"
    assert by_location["axes.seed[1]"].found == "'x'"
    assert (by_location["axes.seed[1]"].line, by_location["axes.seed[1]"].column) == (9, 13)


def test_cross_field_error_points_at_the_variant(coupling: str) -> None:
    text = """\
name: bad
axes:
  baseline: [grpo, dapo]
  kappa:
    ok: {reward_correct: 2, reward_incorrect: 0}
    flipped: {reward_correct: 0, reward_incorrect: 1}
  seed: [0, 1]
"""
    with pytest.raises(UserInputError) as exc:
        expand(parse_spec(text, "bad.yaml"))
    (problem,) = exc.value.problems
    assert problem.location == "axes.kappa.flipped"
    assert "reward_correct must be greater" in problem.message
    assert problem.line == 6


def test_cross_field_error_of_base_points_at_base() -> None:
    text = "name: bad\nbase:\n  clip_ratio: 0.2\n  clip_ratio_low: 0.1\naxes:\n  seed: [0, 1]\n"
    with pytest.raises(UserInputError) as exc:
        expand(parse_spec(text, "bad.yaml"))
    (problem,) = exc.value.problems
    assert problem.location == "base"
    assert "not both" in problem.message


def test_exclusion_that_zip_makes_impossible_is_an_error() -> None:
    text = """\
name: z
axes:
  clip_ratio: [0.2, 0.3]
  clip_label: [lo, hi]
labels: [clip_label]
zip: [[clip_ratio, clip_label]]
exclude:
  - {clip_ratio: 0.2, clip_label: hi}
"""
    with pytest.raises(UserInputError) as exc:
        expand(parse_spec(text, "z.yaml"))
    (problem,) = exc.value.problems
    assert problem.location == "exclude[0]"
    assert "matches no cell" in problem.message and problem.line == 8


def test_duplicate_cells_are_an_error() -> None:
    text = "name: d\naxes:\n  seed: [1, 2, 1]\n"
    with pytest.raises(UserInputError) as exc:
        expand(parse_spec(text, "d.yaml"))
    (problem,) = exc.value.problems
    assert "duplicate cells" in problem.message
    assert (problem.line, problem.column) == (3, 16)


def test_no_axes_is_one_cell_and_plan_prices_it() -> None:
    spec = parse_spec("name: one\nresources: {gpus: 4, nodes: 2, hours: 3}\n", "one.yaml")
    the_plan = plan(spec)
    assert the_plan.count == 1 and the_plan.cells[0].settings == {}
    assert the_plan.gpu_hours == 24
    sweep = plan(parse_spec(SWEEP, "sweep.yaml"))
    assert sweep.gpu_hours == 21 * 8 * 2 * 1.5
    data = sweep.to_dict()
    assert data["count"] == 21 and len(data["cells"]) == 21
    assert data["cells"][0]["settings"]["baseline"] == "grpo"


def test_axes_sharing_a_nested_setting(coupling: str) -> None:
    text = """\
name: nested
base:
  model: {n_layers: 1}
axes:
  model.d_model: [32, 64]
  model.n_heads: [2, 4]
"""
    grid = expand(parse_spec(text, "nested.yaml"))
    assert [c.settings["model"] for c in grid] == [
        {"n_layers": 1, "d_model": 32, "n_heads": 2},
        {"n_layers": 1, "d_model": 32, "n_heads": 4},
        {"n_layers": 1, "d_model": 64, "n_heads": 2},
        {"n_layers": 1, "d_model": 64, "n_heads": 4},
    ]
    backend = get_backend("embedded")
    for cell in grid:
        dump = backend.validate(cell.settings).model_dump(mode="json")
        assert cell.cell_id == content_id("embedded", dump, cell.labels)


def test_cross_field_error_between_two_axes(coupling: str) -> None:
    text = """\
name: nested
axes:
  model.d_model: [32, 30]
  model.n_heads: [2, 4]
  seed: [0, 1]
"""
    with pytest.raises(UserInputError) as exc:
        expand(parse_spec(text, "nested.yaml"))
    (problem,) = exc.value.problems
    assert problem.location == "cells with model.d_model=30, model.n_heads=4"
    assert "divisible" in problem.message
    assert (problem.line, problem.column) == (3, 23)


def test_the_example_in_docs_spec_md_expands() -> None:
    import re

    text = (REPO / "docs/spec.md").read_text()
    match = re.search(r"## A complete example\n\n```yaml\n(.*?)```", text, re.S)
    assert match is not None
    the_plan = plan(parse_spec(match.group(1), "docs/spec.md"))
    # 6 × 2 × 2 × 2 (zipped clip) × 3 = 144, minus gspo × k200 (12), plus the seed-7 include
    assert the_plan.count == 144 - 12 + 1
    assert the_plan.gpu_hours == the_plan.count * 8 * 12
