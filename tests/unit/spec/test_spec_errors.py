"""Bad specs: every problem at once, each with file:line:col, location, found, allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import Problem, UserInputError
from orchestrator.grid.plan import parse_plan
from orchestrator.spec import load_spec, parse_spec

REPO = Path(__file__).resolve().parents[3]


def problems(text: str) -> list[Problem]:
    with pytest.raises(UserInputError) as exc:
        parse_plan(text, "spec.yaml")
    return list(exc.value.problems)


def only(text: str) -> Problem:
    (problem,) = problems(text)
    return problem


def test_toy_spec_loads_and_keeps_its_source() -> None:
    path = REPO / "experiments/toy/table2.yaml"
    spec = load_spec(path)
    assert spec.name == "toy-table2" and spec.backend == "embedded"
    assert spec.source_text == path.read_text()
    assert spec.path == path
    assert spec.axis_names == ("baseline", "reward_budget", "seed")


def test_yaml_syntax_error_has_line_and_column() -> None:
    problem = only("name: x\naxes:\n  seed: [0, 1\n  baseline: [grpo]\n")
    assert problem.file == "spec.yaml" and problem.line == 4 and problem.column is not None
    assert "flow sequence" in problem.message


def test_duplicate_keys_are_errors() -> None:
    problem = only("name: x\naxes:\n  seed: [0]\n  seed: [1]\n")
    assert (problem.location, problem.line, problem.column) == ("axes.seed", 4, 3)
    assert "first given on line 3" in problem.message


def test_unknown_top_level_key_suggests_the_right_one() -> None:
    problem = only("name: x\naxis:\n  seed: [0]\n")
    assert (problem.location, problem.line, problem.column) == ("axis", 2, 1)
    assert problem.fix == "did you mean 'axes'?"
    assert problem.allowed is not None and "axes" in problem.allowed


def test_structure_problems_all_at_once() -> None:
    found = problems(
        "name: Bad Name\naxes:\n  seed: 3\n  lr: [[1, 2]]\nretries: -1\n"
        "resources: {gpu: 1}\nphases: [a]\n"
    )
    by_location = {p.location: p for p in found}
    assert set(by_location) == {
        "name",
        "axes.seed",
        "axes.lr[0]",
        "retries",
        "resources.gpu",
        "phases",
    }
    assert by_location["axes.seed"].message.startswith("an axis is a list of values")
    assert (by_location["axes.seed"].line, by_location["axes.seed"].column) == (3, 3)
    assert by_location["axes.lr[0]"].allowed == "a string, number, boolean or null"
    assert by_location["resources.gpu"].fix == "did you mean 'gpus'?"
    assert "not supported yet" in by_location["phases"].message
    assert all(p.file == "spec.yaml" and p.line for p in found)


def test_unknown_axis_gets_did_you_mean() -> None:
    problem = only("name: x\naxes:\n  baselin: [grpo]\n  seed: [0]\n")
    assert problem.location == "axes.baselin"
    assert (problem.line, problem.column) == (3, 3)
    assert problem.found == "'baselin'"
    assert problem.fix is not None and problem.fix.startswith("did you mean 'baseline'?")
    assert problem.allowed is not None and "labels" in problem.allowed


def test_undeclared_label_axis_suggests_declaring_it() -> None:
    problem = only("name: x\naxes:\n  clip_label: [lo]\n")
    assert problem.fix == (
        "did you mean 'clip_ratio'? If it only names cells, add it to labels: [clip_label]"
    )


def test_dotted_axis_names_nested_settings() -> None:
    spec = parse_spec("name: x\naxes:\n  model.d_model: [32, 64]\n", "spec.yaml")
    assert spec.axis_names == ("model.d_model",)
    problem = only("name: x\naxes:\n  model.d_modle: [32, 64]\n")
    assert problem.fix is not None and problem.fix.startswith("did you mean 'model.d_model'?")


def test_reference_problems_all_at_once() -> None:
    text = """\
name: x
backend: embedded
axes:
  baseline: [grpo, dapo]
  kappa:
    k1: {kl_coef: 0.1}
  kl_coef: [0.1, 0.2]
  seed: [0, 1, 2]
labels: [kappa, sede]
zip:
  - [baseline, seed]
  - [kappa, nope]
exclude:
  - {baseline: grop}
  - {seeds: 1}
include:
  - {baseline: grpo, kappa: k9}
"""
    found = problems(text)
    messages = {(p.location, p.message.split(":")[0]) for p in found}
    assert ("labels[0]", "an axis of named variants needs no label") in messages
    assert ("labels[1]", "label names no axis") in messages
    assert ("axes.kl_coef", "axes 'kappa' and 'kl_coef' both set kl_coef") in messages
    assert ("zip[0]", "zipped axes must have equal lengths") in messages
    assert ("zip[1][1]", "zip names no axis") in messages
    assert (
        "exclude[0].baseline",
        "not a value of axis 'baseline', so this exclusion matches no cell",
    ) in messages
    assert ("exclude[1].seeds", "exclude names an unknown axis") in messages
    assert ("include[0].kappa", "not a variant of axis 'kappa'") in messages
    assert ("include[0]", "an include is a full assignment") in messages
    grop = next(p for p in found if p.location == "exclude[0].baseline")
    assert grop.fix == "did you mean 'grpo'?" and grop.allowed == "'grpo', 'dapo'"
    assert grop.line == 14
    assert len(found) == 9


def test_unknown_backend_lists_known_ones() -> None:
    problem = only("name: x\nbackend: embeded\n")
    assert problem.location == "backend" and problem.fix == "did you mean 'embedded'?"
    assert problem.allowed is not None and "embedded" in problem.allowed


def test_not_a_mapping_and_missing_file(tmp_path: Path) -> None:
    assert only("- a\n- b\n").message.startswith("a spec is a YAML mapping")
    with pytest.raises(UserInputError) as exc:
        load_spec(tmp_path / "nope.yaml")
    assert "cannot read spec" in exc.value.summary


def test_name_selection_and_settings_problems_in_one_run() -> None:
    """A bad name and a broken exclusion do not hide the cells' settings problems."""
    text = """\
name: Bad_Name
backend: embedded
base:
  group_size: 1
  lerning_rate: 0.001
axes:
  baseline: [grpo, grop]
exclude:
  - {baseline: dapo}
"""
    found = problems(text)
    locations = {p.location for p in found}
    assert locations == {"name", "exclude[0].baseline", "base.group_size",
                         "base.lerning_rate", "axes.baseline[1]"}
    by_location = {p.location: p for p in found}
    assert by_location["base.lerning_rate"].fix == "did you mean 'learning_rate'?"
    assert (by_location["name"].line, by_location["base.group_size"].line) == (1, 4)


def test_structure_errors_beyond_leaf_keys_stop_before_the_grid() -> None:
    """When the axes themselves are malformed there is no grid to check yet."""
    found = problems("name: Bad_Name\nbackend: embedded\naxes: [1, 2]\n")
    assert {p.location for p in found} == {"name", "axes"}
