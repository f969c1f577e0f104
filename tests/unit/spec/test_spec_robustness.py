"""Specs nobody tried before: odd YAML, odd values, and what the user sees for each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import Problem, UserInputError
from orchestrator.grid import expand, plan
from orchestrator.grid.plan import parse_plan
from orchestrator.spec import load_spec, parse_spec


def problems_of(text: str) -> list[Problem]:
    with pytest.raises(UserInputError) as exc:
        expand(parse_spec(text, "spec.yaml"))
    return list(exc.value.problems)


def ids(text: str) -> list[str]:
    return [cell.cell_id for cell in expand(parse_spec(text, "spec.yaml")).cells]


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_a_file_that_is_not_utf8_is_located(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"name: x\ndescription: caf\xe9\n")
    with pytest.raises(UserInputError) as exc:
        load_spec(path)
    (problem,) = exc.value.problems
    assert (problem.line, problem.column) == (2, 17)
    assert "UTF-8" in problem.message


def test_a_byte_order_mark_is_not_part_of_the_spec(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"\xef\xbb\xbfname: bom\n")
    assert load_spec(path).name == "bom"


def test_an_empty_file_is_located_at_its_start() -> None:
    with pytest.raises(UserInputError) as exc:
        parse_spec("", "spec.yaml")
    (problem,) = exc.value.problems
    assert (problem.file, problem.line, problem.column) == ("spec.yaml", 1, 1)


def test_keys_that_are_not_names_are_each_reported() -> None:
    with pytest.raises(UserInputError) as exc:
        parse_spec("name: x\n1: a\nbase: {null: 1}\naxes:\n  seed: [0]\nexclude: [{yes: 0}]\n",
                   "spec.yaml")
    found = {(p.location, p.line) for p in exc.value.problems}
    assert found == {("1", 2), ("base.null", 3), ("exclude[0].yes", 6)}
    assert all("quote it" in (p.fix or "") for p in exc.value.problems)


def test_a_setting_written_twice_in_one_block_is_an_error() -> None:
    with pytest.raises(UserInputError) as exc:
        parse_spec(
            "name: x\nbase:\n  model: {n_heads: 4}\n  model.n_heads: 8\naxes:\n  v:\n"
            "    a: {model.d_model: 32, model: {d_model: 64}}\n",
            "spec.yaml",
        )
    locations = sorted(p.location for p in exc.value.problems)
    assert locations == ["axes.v.a.model.d_model", "base.model.n_heads"]
    assert all("set twice" in p.message for p in exc.value.problems)


def test_dotted_keys_in_base_set_nested_settings() -> None:
    dotted = ids("name: x\nbase: {model.n_heads: 2, model.d_model: 32}\n")
    nested = ids("name: y\nbase: {model: {d_model: 32, n_heads: 2}}\n")
    assert dotted == nested
    (cell,) = expand(parse_spec("name: x\nbase: {model.n_heads: 2}\n")).cells
    assert cell.settings == {"model": {"n_heads": 2}}


@pytest.mark.parametrize("spelling", [".inf", "inf", "'inf'", ".Inf"])
def test_every_spelling_of_an_unclipped_ratio_is_one_cell(spelling: str) -> None:
    assert ids(f"name: x\nbase: {{clip_ratio: {spelling}}}\n") == ids(
        "name: x\nbase: {clip_ratio: inf}\n"
    )


def test_inf_twice_in_an_axis_is_a_duplicate() -> None:
    (problem,) = problems_of("name: x\naxes:\n  clip_ratio: [0.2, .inf, inf]\n")
    assert "duplicate cells" in problem.message


def test_plan_json_of_an_unclipped_ratio_is_strict_json() -> None:
    the_plan = plan(parse_spec("name: x\naxes:\n  clip_ratio: [.inf, 0.2]\n  t: [.nan]\n"
                               "labels: [t]\n"))
    data = _strict_json(json.dumps(the_plan.to_dict()))
    assert data["cells"][0]["axes"] == {"clip_ratio": "inf", "t": "nan"}


@pytest.mark.parametrize(
    ("text", "location", "message"),
    [
        ("axes:\n  clip_ratio: [.nan]\n", "axes.clip_ratio[0]", "finite number or 'inf'"),
        ("axes:\n  learning_rate: [.inf]\n", "axes.learning_rate[0]", "finite number"),
        ("base: {kl_coef: -.inf}\n", "base.kl_coef", "finite number"),
        ("axes:\n  seed: [0, true]\n", "axes.seed[1]", "boolean is not a number"),
        ("axes:\n  kappa: {a: {group_size: yes}}\n", "axes.kappa.a.group_size",
         "boolean is not a number"),
    ],
)
def test_values_pydantic_would_bend_are_refused_once_where_written(
    text: str, location: str, message: str
) -> None:
    (problem,) = problems_of("name: x\n" + text)
    assert problem.location == location
    assert message in problem.message
    assert problem.line is not None and problem.column is not None


def test_booleans_still_set_boolean_settings() -> None:
    assert len(ids("name: x\naxes:\n  reward_budget: [false, true]\n")) == 2


@pytest.mark.parametrize("coupled", [False, True])
def test_an_unknown_setting_in_one_variant_is_reported_not_crashed_on(
    coupled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.backends import get_backend

    if not coupled:
        monkeypatch.setattr(type(get_backend("embedded")), "coupled_settings", None)
    found = problems_of(
        "name: x\naxes:\n  kappa: {k1: {reward_correct: 5}, k2: {reward_correct: 2}}\n"
        "  model:\n    small: {d_model: 32}\n    big: {model.d_model: 128}\n"
    )
    assert [(p.location, p.message, p.fix) for p in found] == [
        ("axes.model.small.d_model", "unknown setting", "did you mean 'model.d_model'?")
    ]


def test_an_unknown_setting_two_axes_share_is_reported_not_crashed_on() -> None:
    found = problems_of(
        "name: x\naxes:\n  a: {v1: {foo.x: 1}, v2: {kl_coef: 0.1}}\n"
        "  b: {w1: {foo.y: 1}, w2: {entropy_coef: 0.1}}\n"
    )
    assert found and all(p.message == "unknown setting" for p in found)


def test_a_required_setting_one_variant_forgot_is_placed_at_that_variant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAPPA_VERL_PREFLIGHT", "off")
    (problem,) = problems_of(
        "name: x\nbackend: verl\nbase: {train_files: t.parquet, val_files: v.parquet}\n"
        "axes:\n  model:\n    qwen: {model_path: Qwen/Qwen3-8B}\n    llama: {}\n"
    )
    assert problem.location == "axes.model.llama"
    assert "model_path" in problem.message and problem.line == 7


def test_bad_names_say_what_a_name_may_be() -> None:
    with pytest.raises(UserInputError) as exc:
        parse_spec(
            "name: My Sweep\naxes:\n  κ: [a]\n  v: {'two words': {}}\nlabels: [κ]\n"
            "zip: [['x y', v]]\n",
            "spec.yaml",
        )
    by_location = {p.location: p for p in exc.value.problems}
    assert set(by_location) == {"name", "axes.κ", "axes.v.two words", "labels[0]", "zip[0][0]"}
    assert all("[key]" not in p.location and "pattern" not in p.message
               for p in exc.value.problems)
    assert by_location["axes.v.two words"].allowed == "no spaces"
    assert "lowercase" in (by_location["name"].allowed or "")


def test_a_repeated_value_is_reported_once_not_once_per_other_combination() -> None:
    (problem,) = problems_of(
        "name: x\naxes:\n  group_size: [2, 4, 8]\n  learning_rate: [1e-3, 0.001]\n"
    )
    assert "duplicate cells" in problem.message and (problem.line, problem.column) == (4, 25)


def test_a_label_listed_twice_is_an_error() -> None:
    with pytest.raises(UserInputError) as exc:
        parse_spec("name: x\naxes:\n  t: [a, b]\nlabels: [t, t]\n", "spec.yaml")
    (problem,) = exc.value.problems
    assert problem.location == "labels[1]" and "twice" in problem.message


def test_base_problems_come_with_broken_axes_in_one_run() -> None:
    with pytest.raises(UserInputError) as exc:
        parse_plan(
            "name: x\nbase:\n  model.d_mdl: 3\n  group_size: 1\n  seed: x\n"
            "axes:\n  model.n_layer: [1]\n  seed: [0]\n",
            "spec.yaml",
        )
    by_location = {p.location: p for p in exc.value.problems}
    # base.seed is not reported: the seed axis overrides it in every cell.
    assert set(by_location) == {"axes.model.n_layer", "base.model.d_mdl", "base.group_size"}
    assert by_location["base.model.d_mdl"].fix == "did you mean 'd_model'?"
    assert by_location["base.group_size"].line == 4
