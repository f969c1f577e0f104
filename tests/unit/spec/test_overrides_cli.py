"""Command-line overrides (Hydra grammar) through the real ``kappa`` entry point: a spec
with overrides is exactly the spec edited by hand (same plan, same cell ids), and a bad
override is an exit-2 error naming it, with every problem at once."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kit.cli import run_kappa, user_error

from orchestrator.spec.overrides import command_line

SPEC: dict[str, Any] = {
    "name": "overridden",
    "backend": "embedded",
    "base": {"task": "arithmetic", "max_steps": 10, "group_size": 4,
             "model": {"d_model": 32}},
    "axes": {"baseline": ["grpo", "drgrpo"], "seed": [0, 1],
             "kappa": {"k5": {"reward_correct": 5}, "k1": {"reward_correct": 1}}},
    "exclude": [{"baseline": "drgrpo", "seed": 0}],
    "resources": {"gpus": 0, "hours": 0.5},
    "retries": 1,
}


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _plan(capsys: pytest.CaptureFixture[str], spec: Path, *overrides: str) -> tuple[int, str]:
    ran = run_kappa(capsys, "plan", str(spec), *overrides, "--json")
    return ran.code, ran.out if ran.code == 0 else ran.err


# Each edit: the override as typed, and the same change made by hand to the spec's data.
def _set(path: tuple[str, ...], value: Any):  # type: ignore[no-untyped-def]
    def edit(data: dict[str, Any]) -> None:
        for key in path[:-1]:
            data = data.setdefault(key, {})
        data[path[-1]] = copy.deepcopy(value)
    return edit


def _delete(key: str):  # type: ignore[no-untyped-def]
    return lambda data: data.pop(key)


def _hydra(value: Any) -> str:
    """``value`` in Hydra's grammar (text single-quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list):
        return "[" + ",".join(_hydra(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_hydra(v)}" for k, v in value.items()) + "}"
    return repr(value)


_TEXT = st.text(st.sampled_from("abc XYZ,:=[]{}#-_.0123456789é"), min_size=1, max_size=12
                ).filter(lambda s: s.strip() == s)
EDITS = st.one_of(
    st.integers(1, 50).map(lambda v: (f"base.max_steps={v}", _set(("base", "max_steps"), v))),
    st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True).map(
        lambda v: (f"axes.seed={_hydra([0, *v])}", _set(("axes", "seed"), [0, *v]))),
    st.floats(1e-4, 1e-1).map(
        lambda v: (f"+base.kl_coef={v!r}", _set(("base", "kl_coef"), v))),
    st.just(("~exclude", _delete("exclude"))),
    st.sampled_from(["quick-check", "a.b_c", "x1"]).map(
        lambda v: (f"name={v}", _set(("name",), v))),
    _TEXT.map(lambda v: (f"++description={_hydra(v)}", _set(("description",), v))),
    st.just(("++axes.reward_budget=[false,true]",
             _set(("axes", "reward_budget"), [False, True]))),
    st.sampled_from([16, 64]).map(
        lambda v: (f"base.model.d_model={v}", _set(("base", "model", "d_model"), v))),
    st.integers(1, 9).map(lambda v: (f"axes.kappa.k1.reward_correct={v}",
                                     _set(("axes", "kappa", "k1", "reward_correct"), v))),
    st.sampled_from([0, 3]).map(lambda v: (f"retries={v}", _set(("retries",), v))),
)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=st.lists(EDITS, min_size=1, max_size=4,
                      unique_by=lambda e: e[0].lstrip("+~").split("=")[0]))
def test_a_spec_with_overrides_is_the_spec_edited_by_hand(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, edits: list[Any]) -> None:
    spec = _write(tmp_path / "spec.yaml", SPEC)
    by_hand = copy.deepcopy(SPEC)
    for _, edit in edits:
        edit(by_hand)
    edited = _write(tmp_path / "edited.yaml", by_hand)
    code, out = _plan(capsys, spec, *(text for text, _ in edits))
    hand_code, hand_out = _plan(capsys, edited)
    assert code == hand_code, (out, hand_out)
    if code == 0:  # the same plan: name, cells, their settings and ids
        assert json.loads(out) == json.loads(hand_out)
    else:  # the same problems, named at the override instead of the file
        assert code == 2 and out.count("\n  - ") == hand_out.count("\n  - "), (out, hand_out)


def test_validate_plan_and_canary_take_overrides(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = _write(tmp_path / "spec.yaml", SPEC)
    ran = run_kappa(capsys, "validate", str(spec), "axes.seed=[0,1,2]", "~exclude")
    assert (ran.code, ran.out.strip()) == (0, "ok: 12 cells"), ran.output
    ran = run_kappa(capsys, "plan", str(spec), "name=quick-check", "base.max_steps=20")
    assert ran.code == 0 and "quick-check" in ran.out, ran.output
    ran = run_kappa(capsys, "canary", str(spec), "--dry-run", "~axes.kappa", "~exclude")
    assert ran.code == 0 and "2 canaries for 4 cells" in ran.out, ran.output
    ran = run_kappa(capsys, "submit", "--help")
    assert "[OVERRIDE]..." in ran.out and "+key=value" in ran.out


def test_bad_overrides_are_all_reported_at_once_naming_each(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = _write(tmp_path / "spec.yaml", SPEC)
    error = user_error(capsys, "validate", str(spec), "base.max_stesp=20", "axes.seed=[0,1",
                       "~labels", "+name=x", "axes.seed=0,1", "base.task.x=1",
                       "~retries=2", "exclude.3.seed=1", "a@pkg=1")
    found = {p.location: p for p in error.problems}
    assert list(found) == ["override 1: base.max_stesp", "override 2", "override 3: labels",
                           "override 4: name", "override 5: axes.seed",
                           "override 6: base.task.x", "override 7: retries",
                           "override 8: exclude.3.seed", "override 9"]
    assert found["override 1: base.max_stesp"].fix == (
        "did you mean 'max_steps'? (or, to add max_stesp, write +base.max_stesp=20)")
    assert "not an override" in found["override 2"].message
    assert "no labels" in found["override 3: labels"].message
    assert found["override 4: name"].message == "already in the spec"
    assert "multirun" in found["override 5: axes.seed"].message
    assert "base.task is a value" in found["override 6: base.task.x"].message
    assert "holds 1, not 2" in found["override 7: retries"].message
    assert "list of 1" in found["override 8: exclude.3.seed"].message
    ran = run_kappa(capsys, "validate", str(spec), "~labels")
    assert ran.code == 2 and "override 1: labels: the spec has no labels" in ran.err


def test_spec_problems_at_an_overridden_key_point_at_the_override(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = _write(tmp_path / "spec.yaml", SPEC)
    error = user_error(capsys, "validate", str(spec), "retries=-1", "axes.seed=[[0]]")
    where = {p.location for p in error.problems}
    assert where == {"override 1: retries", "override 2: axes.seed[0]"}, where
    assert all(p.file is None for p in error.problems)
    # Cells' settings too; a key the overrides left alone keeps its place in the file.
    error = user_error(capsys, "validate", str(spec), "+base.max_stesp=3", "base.group_size=0")
    by_location = {p.location: p for p in error.problems}
    assert "override 1: base.max_stesp" in by_location, by_location
    assert any(loc.startswith("override 2: base.group_size") for loc in by_location)
    error = user_error(capsys, "validate", str(spec), "axes.kappa.k1.reward_correct=x")
    assert error.problems[0].location.startswith("override 1: axes.kappa"), error.problems


def test_resolved_text_reads_back_to_the_same_spec() -> None:
    from orchestrator.spec.loader import read_spec

    text = yaml.safe_dump(SPEC, sort_keys=False)
    overrides = ["+description='1e-3'", "++base.lr_note='2024-01-01'", "~exclude",
                 "base.max_steps=inf", "+axes.model.d_model=[16,32]"]
    reading = read_spec(text, "s.yaml", None, overrides)
    source = reading.spec.source_text
    # The overrides are not quoted in it: the sweep keeps them as data (its plan).
    assert source.startswith("# s.yaml as resolved with command-line overrides (")
    assert "lr_note='2024" not in source.splitlines()[0]
    again = read_spec(source, "again.yaml")
    assert again.spec.model_dump() == reading.spec.model_dump()
    assert reading.spec.description == "1e-3"  # text that YAML 1.2 would read as a number
    assert reading.spec.axis_names[-1] == "model.d_model"  # one axis name, dots and all
    assert command_line(["a=1", "b='x y'", "c=[0, 1]"]) == "a=1 \"b='x y'\" 'c=[0, 1]'"


#: Overrides that crashed Hydra's parser (RecursionError, ValueError, a RangeSweep in the
#: resolved YAML) or took minutes in it (a 20,000-item list: 79 s); each is refused before
#: it is parsed, with the limit it passes (orchestrator.limits, docs/spec.md#limits).
HOSTILE = {
    "nested lists": ("+base.x=" + "[" * 1000 + "1" + "]" * 1000, "nested 1,000 deep"),
    "nested mappings": ("+base.x=" + "{a:" * 1000 + "1" + "}" * 1000, "nested 1,000 deep"),
    "nested calls": ("base.x=" + "int(" * 1000 + "1" + ")" * 1000, "nested 1,000 deep"),
    "dotted key": ("+base." + ".".join(["a"] * 1000) + "=1", "a key of 1,001 dotted parts"),
    "digits": ("base.max_steps=" + "9" * 5000, "a number of 5,000 digits"),
    "digits and _": ("base.max_steps=" + "9_" * 3000 + "9", "a number of 6,001 digits"),
    "range in a list": ("axes.baseline=[range(0,10)]", "a Hydra sweep"),
    "20,000 items": ("axes.seed=[" + ",".join(map(str, range(20_000))) + "]",
                     "108,901 characters"),
    "4,990 short items": ("axes.seed=[" + ",".join(["0"] * 4990) + "]",
                          "4,989 list and mapping items"),
    "long": ("description=" + "x" * 20_000, "20,012 characters"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=str)
def test_a_hostile_override_is_refused_with_its_limit(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str) -> None:
    override, said = HOSTILE[case]
    error = user_error(capsys, "validate", str(_write(tmp_path / "s.yaml", SPEC)), override)
    assert any(said in p.message for p in error.problems), error.problems
    assert all(p.location.startswith("override 1") for p in error.problems)


def test_many_overrides_are_bounded_together(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    from orchestrator import limits

    spec = str(_write(tmp_path / "s.yaml", SPEC))
    error = user_error(capsys, "validate", spec, *["retries=1"] * (limits.MAX_OVERRIDES + 1))
    assert error.problems[0].location == "overrides"
    error = user_error(capsys, "validate", spec, *["description=" + "x" * 9_980] * 11)
    assert [p.location for p in error.problems] == ["overrides"]
    assert "109,912 characters in all" in error.problems[0].message
    lists = ["axes.seed=[" + ",".join(["0"] * 600) + "]"] * 2  # 599 commas each
    error = user_error(capsys, "validate", spec, *lists)
    assert [p.message.split(" (")[0] for p in error.problems] == [
        "1,198 list and mapping items in all"]
    code, out = _plan(capsys, _write(tmp_path / "t.yaml", SPEC), "base.max_steps=" + "9" * 9,
                      "+base.note='" + "[" * 100 + ",," * 500 + "'")  # quoted text: not counted
    assert "base.max_steps" in out and code == 2, out  # refused by the setting's own range


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.one_of(
    st.text(max_size=30),
    st.text(st.sampled_from("abxy.+~=[]{},:'\"\\ 0123456789-_$@/()*"), max_size=30),
    st.sampled_from(["axes.seed=", "base.", "~", "++", "exclude.", "axes.kappa.k5"]).flatmap(
        lambda head: st.text(st.sampled_from("a.0=[]{}~,'1"), max_size=12).map(
            lambda tail: head + tail)),
    st.sampled_from([text for text, _ in HOSTILE.values()]),
    st.sampled_from(["axes.seed=", "+base.x=", "base."]).flatmap(  # deep, long, many digits
        lambda head: st.tuples(st.sampled_from(["[", "{a:", "int(", "9", "a.", ","]),
                               st.integers(0, 2000)).map(lambda p: head + p[0] * p[1]))),
    max_size=4))
def test_any_override_is_applied_or_a_user_error(texts: list[str]) -> None:
    from orchestrator.errors import UserInputError
    from orchestrator.spec.loader import read_spec

    try:
        read_spec(yaml.safe_dump(SPEC, sort_keys=False), "s.yaml", None, texts)
    except UserInputError as exc:  # anything else would be a traceback in front of a user
        assert exc.problems


def _exclude_more(data: dict[str, Any]) -> None:
    data["exclude"].append({"baseline": "grpo", "seed": 1})


def _no_k5(data: dict[str, Any]) -> None:
    del data["axes"]["kappa"]["k5"]


def _dotted_axis(data: dict[str, Any]) -> None:
    data["axes"]["model.n_layers"] = [1, 2]


@pytest.mark.parametrize(("overrides", "edit"), [
    (["+exclude.1={baseline: grpo, seed: 1}"], _exclude_more),
    (["exclude.0.seed=1"], _set(("exclude",), [{"baseline": "drgrpo", "seed": 1}])),
    (["~exclude.0"], _set(("exclude",), [])),
    (["~axes.kappa.k5"], _no_k5),
    (["+axes.model.n_layers=[1,2]"], _dotted_axis),
    (["'exclude=[{baseline: grpo, seed: 1}]'".strip("'")],
     _set(("exclude",), [{"baseline": "grpo", "seed": 1}])),
])
def test_lists_variants_and_dotted_axes_as_edited_by_hand(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, overrides: list[str],
        edit: Any) -> None:
    by_hand = copy.deepcopy(SPEC)
    edit(by_hand)
    code, out = _plan(capsys, _write(tmp_path / "spec.yaml", SPEC), *overrides)
    assert code == 0, out
    assert json.loads(out) == json.loads(_plan(capsys, _write(tmp_path / "e.yaml", by_hand))[1])
