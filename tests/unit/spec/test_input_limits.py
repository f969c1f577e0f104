"""Every bound on input (orchestrator.limits): refused with a located problem, exit 2.

Each test pins one limit at its edge: the largest input that passes and the smallest
that is refused, and what the user is told.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import limits
from orchestrator.errors import Problem, UserInputError
from orchestrator.grid import assignments as assignments_module
from orchestrator.grid import expand
from orchestrator.spec import load_spec, parse_spec
from orchestrator.spec.yaml_source import load_yaml


def refused(text: str) -> list[Problem]:
    with pytest.raises(UserInputError) as exc:
        expand(parse_spec(text, "spec.yaml"))
    return list(exc.value.problems)


def bomb(levels: int, width: int = 10) -> str:
    """The "billion laughs": each level lists ``width`` aliases of the one before."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "name: x\ndescription:\n  " + "\n  ".join(lines) + "\n"


# --- YAML: aliases, recursion, depth, size ------------------------------------------------


def test_an_alias_bomb_is_refused_before_anything_is_built(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.spec import yaml_source

    def never(*args: Any) -> Any:
        raise AssertionError("the document was built")

    monkeypatch.setattr(yaml_source._Loader, "construct_document", never)
    with pytest.raises(UserInputError) as exc:
        load_yaml(bomb(9), "spec.yaml")  # 10^9 strings once expanded
    (problem,) = exc.value.problems
    # l4 is the first level past 100,000 values (10^5 strings + the lists holding them).
    assert (problem.file, problem.line, problem.location) == ("spec.yaml", 7, "description.l4")
    assert "aliases" in problem.message and "100,000" in problem.message


def test_aliases_within_the_limit_are_expanded() -> None:
    doc = load_yaml(bomb(3), "spec.yaml")  # 1,000 strings
    assert len(doc.data["description"]["l2"]) == 10
    assert doc.data["description"]["l2"][0][0] == ["lol"] * 10


@pytest.mark.parametrize(("text", "where"), [
    ("a: &x [1, *x]\n", ("a[1]", 1)),
    ("a: &x {b: {c: *x}}\n", ("a.b.c", 1)),
    ("a: &x\n  b: 1\n  <<: *x\n", ("a.<<", 1)),
    ("- &x [[*x]]\n", ("[0][0][0]", 1)),
])
def test_a_recursive_alias_is_refused_where_it_is_written(
        text: str, where: tuple[str, int]) -> None:
    with pytest.raises(UserInputError) as exc:
        load_yaml(text, "spec.yaml")
    (problem,) = exc.value.problems
    assert (problem.location, problem.line) == where
    assert "recursive alias" in problem.message and problem.fix


def flow_nesting(levels: int) -> str:
    """A document ``levels`` deep: the root mapping, then ``levels - 1`` lists."""
    return "a: " + "[" * (levels - 1) + "]" * (levels - 1) + "\n"


def test_nesting_is_bounded_at_its_edge() -> None:
    load_yaml(flow_nesting(limits.MAX_YAML_DEPTH), "spec.yaml")
    with pytest.raises(UserInputError) as exc:
        load_yaml(flow_nesting(limits.MAX_YAML_DEPTH + 1), "spec.yaml")
    (problem,) = exc.value.problems
    assert f"more than {limits.MAX_YAML_DEPTH} levels" in problem.message
    assert problem.line == 1 and problem.location.endswith(f"({limits.MAX_YAML_DEPTH} levels)")


def test_dots_in_a_key_count_as_nesting() -> None:
    """`a.b.c: 1` nests as deep as `a: {b: {c: 1}}` once read; 5,000 dots crashed."""
    key = ".".join(["model"] + ["x"] * 5000)
    with pytest.raises(UserInputError) as exc:
        parse_spec(f"name: x\nbase:\n  ? {key}\n  : 1\n", "spec.yaml")
    (problem,) = exc.value.problems
    assert problem.line == 4 and "a dot in a key counts" in problem.message
    assert len(problem.location) < 100  # the key is shortened, not printed whole


def test_deep_nesting_through_an_alias_is_measured() -> None:
    """Each use of an alias is as deep as where it is used plus the anchored node's depth."""
    inner = "[" * 40 + "]" * 40
    load_yaml(f"a: &x {inner}\nb: {'[' * 20}*x{']' * 20}\n", "spec.yaml")
    with pytest.raises(UserInputError) as exc:
        load_yaml(f"a: &x {inner}\nb: {'[' * 30}*x{']' * 30}\n", "spec.yaml")
    (problem,) = exc.value.problems
    assert problem.line == 1 and "levels deep" in problem.message  # where the alias leads


def test_the_number_of_values_is_bounded() -> None:
    keys = limits.MAX_YAML_NODES // 2  # each key and its value: the root makes it one over
    text = "".join(f"k{i}: 0\n" for i in range(keys))
    with pytest.raises(UserInputError) as exc:
        load_yaml(text, "spec.yaml")
    (problem,) = exc.value.problems
    assert problem.line == keys and "more than 100,000 values" in problem.message
    load_yaml("".join(f"k{i}: 0\n" for i in range(keys - 1)), "spec.yaml")


def test_a_file_is_read_only_up_to_the_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"name: x\n" + b"#" * limits.MAX_FILE_BYTES)
    with pytest.raises(UserInputError) as exc:
        load_spec(path)
    (problem,) = exc.value.problems
    assert problem.file == str(path) and "larger than 1,024 KiB" in problem.message


def test_a_folder_or_a_missing_file_is_named(tmp_path: Path) -> None:
    for path, words in ((tmp_path, "folder"), (tmp_path / "nope.yaml", "No such file")):
        with pytest.raises(UserInputError) as exc:
            load_spec(path)
        assert words in exc.value.problems[0].message
        assert exc.value.problems[0].file == str(path)


@pytest.mark.parametrize(("value", "words"), [
    (".e5", "not a number"),
    ("-e5", "not a number"),
    ("0x_", "not a number"),
    ("0b_", "not a number"),
    ("1" + "0" * 5000, "not a number"),
    ("!!binary aGk=", "!!binary is not supported"),
    ("!!set {a, b}", "!!set is not supported"),
    ("!!omap [{a: 1}]", "!!omap is not supported"),
    ("!!timestamp 2024-01-01", "!!timestamp is not supported"),
    ("!!python/object:os.system x", "could not determine a constructor"),
])
def test_yaml_values_python_cannot_hold_are_located(value: str, words: str) -> None:
    with pytest.raises(UserInputError) as exc:
        load_yaml(f"name: x\nd: {value}\n", "spec.yaml")
    (problem,) = exc.value.problems
    assert (problem.line, problem.column) == (2, 4)
    assert words in problem.message


def test_dates_are_text() -> None:
    """`2024-02-30` crashed the date constructor; no setting takes a date anyway."""
    assert load_yaml("a: 2024-02-30\nb: 2024-01-01\n", "f").data == {
        "a": "2024-02-30", "b": "2024-01-01"}


@pytest.mark.parametrize(("text", "where"), [
    ("name: x\nd: a\x00b\n", (2, 5)),
    ("é: 1\nd: x\x07\n", (2, 5)),
    ("name: x\nd: \ud800\n", (2, 4)),
])
def test_characters_yaml_refuses_are_located(text: str, where: tuple[int, int]) -> None:
    with pytest.raises(UserInputError) as exc:
        load_yaml(text, "spec.yaml")
    (problem,) = exc.value.problems
    assert (problem.line, problem.column) == where


# --- grids ----------------------------------------------------------------------------------


def grid_spec(lengths: list[int], extra: str = "") -> str:
    axes = ["seed", "group_size", "prompts_per_step", "max_steps", "val_every",
            "checkpoint_every", "val_size", "eval_samples"]
    text = "name: x\naxes:\n"
    for axis, n in zip(axes, lengths, strict=False):
        start = 2 if axis == "group_size" else 1
        text += f"  {axis}: {list(range(start, start + n))}\n"
    return text + extra


def test_a_huge_grid_is_counted_from_the_axes_not_enumerated(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: Any) -> Any:
        raise AssertionError("the grid was enumerated")

    monkeypatch.setattr(assignments_module, "product", never)
    (problem,) = refused(grid_spec([10] * 7))
    assert problem.message == "the grid has up to 10,000,000 cells, more than the limit of 100,000"
    assert problem.found is not None and problem.found.startswith("10 (seed) × 10 (group_size)")
    assert problem.fix is not None and "KAPPA_MAX_CELLS=10000000" in problem.fix
    assert (problem.file, problem.line) == ("spec.yaml", 2)


def test_an_astronomic_grid_is_reported_as_a_power_of_ten() -> None:
    text = "name: x\nlabels: [" + ", ".join(f"l{i}" for i in range(64)) + "]\naxes:\n"
    text += "".join(f"  l{i}: [a, b, c]\n" for i in range(64))
    (problem,) = refused(text)
    assert "about 10^30 cells" in problem.message
    assert problem.fix == "shorten axes or zip them"  # no limit the registry could index


def test_zip_and_include_enter_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_MAX_CELLS", "10")
    zipped = "labels: [tag]\nzip: [[seed, tag]]\n"
    text = "name: x\naxes:\n  seed: [1, 2, 3]\n  tag: [a, b, c]\n  group_size: [2, 4, 8]\n"
    assert len(expand(parse_spec(text + zipped, "spec.yaml"))) == 9
    include = "include:\n" + "".join(
        f"  - {{seed: {s}, tag: a, group_size: 2}}\n" for s in (7, 8))
    (problem,) = refused(text + zipped + include)
    assert "up to 11 cells" in problem.message and problem.found == (
        "3 (seed & tag) × 3 (group_size) + 2 included")


def test_kappa_max_cells_raises_or_lowers_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAPPA_MAX_CELLS", "24")
    assert len(expand(parse_spec(grid_spec([4, 6]), "spec.yaml"))) == 24
    (problem,) = refused(grid_spec([5, 5]))
    assert "more than the limit of 24" in problem.message
    assert problem.allowed == "<= 24 cells (default 100,000)"


@pytest.mark.parametrize("value", ["0", "-5", "many", "1e6", "99999999999", "²"])
def test_a_bad_kappa_max_cells_is_a_user_error(
        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("KAPPA_MAX_CELLS", value)
    with pytest.raises(UserInputError) as exc:
        expand(parse_spec("name: x\n", "spec.yaml"))
    assert exc.value.problems[0].location == "KAPPA_MAX_CELLS"


# --- numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "location", "words"), [
    ("retries: 101", "retries", "less than or equal to 100"),
    ("retries: true", "retries", "valid integer"),
    ("retries: 2.0", "retries", "valid integer"),
    ("retries: 100000000000000000000", "retries", "less than or equal to 100"),
    ("resources: {gpus: true}", "resources.gpus", "valid integer"),
    ("resources: {gpus: '2'}", "resources.gpus", "valid integer"),
    ("resources: {nodes: yes}", "resources.nodes", "valid integer"),
    ("resources: {cpus: 1.5}", "resources.cpus", "valid integer"),
    ("resources: {hours: true}", "resources.hours", "valid number"),
    ("resources: {hours: .inf}", "resources.hours", "valid number"),
    ("resources: {hours: 10001}", "resources.hours", "less than or equal to 10000"),
    ("resources: {gpus: 1025}", "resources.gpus", "less than or equal to 1024"),
    ("resources: {gpus: 8, nodes: 513}", "resources", "more than 4096 GPUs for one cell"),
])
def test_resources_and_retries_are_whole_bounded_numbers(
        text: str, location: str, words: str) -> None:
    (problem,) = refused(f"name: x\n{text}\n")
    assert problem.location == location and words in problem.message
    assert (problem.file, problem.line) == ("spec.yaml", 2)


def test_resources_at_their_bounds_are_accepted() -> None:
    spec = parse_spec("name: x\nretries: 100\nresources: {gpus: 8, nodes: 512, hours: 10000, "
                      "cpus: 4096}\n", "spec.yaml")
    assert spec.resources.gpus * spec.resources.nodes == limits.MAX_GPUS_PER_CELL


@pytest.mark.parametrize(("setting", "largest"), [
    ("max_steps", limits.MAX_STEPS),
    ("seed", limits.MAX_SEED),
    ("group_size", limits.MAX_GROUP_SIZE),
    ("warm_start.steps", limits.MAX_STEPS),
    ("checkpoint_every", limits.MAX_STEPS),
    ("eval_samples", limits.MAX_GROUP_SIZE),
    ("ppo_epochs", limits.MAX_ATTEMPTS),
])
def test_cell_numbers_are_bounded_by_what_can_run(setting: str, largest: int) -> None:
    expand(parse_spec(f"name: x\nbase: {{{setting}: {largest}}}\n", "spec.yaml"))
    problems = refused(f"name: x\naxes:\n  {setting}: [{largest + 1}, 10000000000000000000000]\n")
    assert [p.location for p in problems] == [f"axes.{setting}[0]", f"axes.{setting}[1]"]
    assert all("less than or equal" in p.message and p.line == 3 for p in problems)


@pytest.mark.parametrize(("setting", "smallest", "largest"), [
    ("kl_coef", 0, limits.MAX_SCALE),
    ("entropy_coef", 0, limits.MAX_SCALE),
    ("overlong_penalty_factor", 0, limits.MAX_SCALE),
    ("reward_correct", 0.5, limits.MAX_SCALE),
    ("reward_incorrect", -limits.MAX_SCALE, 0.5),
    ("temperature", 1 / limits.MAX_SCALE, limits.MAX_SCALE),
])
def test_reward_and_loss_scales_are_bounded_by_what_float32_holds(
        setting: str, smallest: float, largest: float) -> None:
    """1e39 is no float32: such a setting passed and training overflowed at step 1."""
    for edge in (smallest, largest):
        expand(parse_spec(f"name: x\nbase: {{{setting}: {edge!r}}}\n", "spec.yaml"))
    too_big = "1.0e+39" if setting != "reward_incorrect" else "-1.0e+39"
    problems = refused(f"name: x\naxes:\n  {setting}: [{too_big}]\n")
    assert [p.location for p in problems] == [f"axes.{setting}[0]"]
    assert problems[0].line == 3 and "than or equal to" in problems[0].message


@pytest.mark.parametrize("setting", ["clip_ratio", "clip_ratio_high", "clip_ratio_c"])
def test_a_clip_ratio_past_what_float32_holds_is_refused(setting: str) -> None:
    expand(parse_spec(f"name: x\nbase: {{{setting}: {limits.MAX_SCALE!r}}}\n", "spec.yaml"))
    expand(parse_spec(f"name: x\nbase: {{{setting}: inf}}\n", "spec.yaml"))  # no clipping
    problems = refused(f"name: x\nbase: {{{setting}: 1.0e+39}}\n")
    assert any(f"{setting} must be" in p.message and "'inf'" in p.message for p in problems)


def test_a_negative_seed_is_refused() -> None:
    (problem,) = refused("name: x\nbase: {seed: -1}\n")
    assert problem.location == "base.seed" and "greater than or equal to 0" in problem.message


def test_verl_gpus_per_cell_are_bounded() -> None:
    text = ("name: x\nbackend: verl\nbase: {model_path: m, train_files: t, val_files: v, "
            "nnodes: 4096, n_gpus_per_node: 8}\n")
    problems = refused(text)
    assert any("more than 4096 GPUs for one cell" in p.message for p in problems)


# --- many problems --------------------------------------------------------------------------


def test_problems_are_capped_and_the_rest_counted() -> None:
    seeds = ", ".join(f"s{i}" for i in range(500))
    problems = refused(f"name: x\naxes:\n  seed: [{seeds}]\n")
    assert len(problems) == limits.MAX_PROBLEMS + 1
    assert problems[-1].message.startswith("... and more problems not listed")


def test_unknown_top_level_keys_are_capped() -> None:
    text = "name: x\n" + "".join(f"key{i}: 1\n" for i in range(1000))
    with pytest.raises(UserInputError) as exc:
        parse_spec(text, "spec.yaml")
    problems = exc.value.problems
    assert len(problems) == limits.MAX_PROBLEMS + 1
    assert problems[-1].message == "... and 900 more problem(s) not listed (the first 100 are)"


def test_more_than_64_axes_is_refused() -> None:
    text = "name: x\nlabels: [" + ", ".join(f"l{i}" for i in range(65)) + "]\naxes:\n"
    text += "".join(f"  l{i}: [a]\n" for i in range(65))
    with pytest.raises(UserInputError) as exc:
        parse_spec(text, "spec.yaml")
    assert {p.location for p in exc.value.problems} == {"axes", "labels"}


# --- kappa train ----------------------------------------------------------------------------


def test_train_refuses_bad_configs_and_out_paths(tmp_path: Path, kappa: Any) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("max_steps: 1\n")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"task: arithm\xe9tic\n")
    huge = tmp_path / "huge.yaml"
    huge.write_text("max_steps: 100000000000000000000\nseed: true\n")
    bombed = tmp_path / "bomb.yaml"
    bombed.write_text(bomb(8).replace("name: x\n", ""))
    cases = [
        ([str(latin1)], f"{latin1}:1:13: not UTF-8 text"),
        ([str(tmp_path)], "this is a folder"),
        ([str(huge)], f"{huge}:1:1: max_steps: Input should be less than or equal to"),
        ([str(bombed)], f"{bombed}:6:7: description.l4: aliases"),
        ([str(good), "--out", str(a_file)], "--out: this is a file, not a folder"),
        ([str(good), "--out", str(a_file / "run")], "--out: cannot write here"),
        ([str(good), "--out", "/proc/kappa-run"], "--out: cannot write here"),
    ]
    for args, message in cases:
        out = ["--out", str(tmp_path / "run")] if "--out" not in args else []
        code, _, err = kappa(["train", *args, *out])
        assert code == 2, err
        assert message in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()
    assert yaml.safe_load(good.read_text()) == {"max_steps": 1}
