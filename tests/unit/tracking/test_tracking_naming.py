"""Run names, tags and params of a cell (pure functions, no MLflow)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from orchestrator.tracking.naming import (
    MAX_KEY_LENGTH,
    MAX_PARAM_VALUE_LENGTH,
    MAX_SHORT_NAME,
    TRUNCATED,
    batches,
    cell_tags,
    clip,
    safe_key,
    settings_params,
    short_names,
)


@dataclass(frozen=True)
class Named:
    cell_id: str
    axes: dict[str, Any]
    labels: dict[str, Any] = field(default_factory=dict)


def _grid(**axes: list[Any]) -> list[Named]:
    names = list(axes)
    return [Named(f"{i:06x}" * 2, dict(zip(names, values, strict=True)))
            for i, values in enumerate(itertools.product(*axes.values()))]


def test_short_names_name_the_axes_that_vary() -> None:
    cells = _grid(baseline=["grpo", "drgrpo"], reward_budget=[False, True], seed=[0, 1],
                  task=["arithmetic"])
    assert list(short_names(cells).values()) == [
        "grpo -RB s0", "grpo -RB s1", "grpo +RB s0", "grpo +RB s1",
        "drgrpo -RB s0", "drgrpo -RB s1", "drgrpo +RB s0", "drgrpo +RB s1"]
    # Numbers keep their axis (a bare 0.2 says nothing); labels are shown, not values.
    cells = [Named("a", {"clip": 0.2, "kappa": {"kl": 1}}, {"kappa": "k200"}),
             Named("b", {"clip": 0.28, "kappa": {"kl": 2}}, {"kappa": "k5000"})]
    assert short_names(cells) == {"a": "clip=0.2 k200", "b": "clip=0.28 k5000"}
    # Nothing varies (one cell): every axis names it; no axes: "cell".
    assert short_names([Named("a", {"baseline": "grpo", "seed": 3})]) == {"a": "grpo s3"}
    assert short_names([Named("a", {})]) == {"a": "cell"}


def test_short_names_abbreviate_booleans_unless_two_would_look_alike() -> None:
    cells = _grid(use_kl_loss=[False, True], dynamic_sampling=[True, False])
    assert set(short_names(cells).values()) == {"-UKL +DS", "-UKL -DS", "+UKL +DS", "+UKL -DS"}
    cells = _grid(reward_budget=[False, True], relative_baseline=[False, True])
    assert "+reward_budget -relative_baseline" in short_names(cells).values()
    assert set(short_names(_grid(normalize=[True, False])).values()) == {"+normalize",
                                                                         "-normalize"}


def test_short_names_are_unique_within_the_sweep() -> None:
    # Two cells that differ only past the cut of a value.
    cells = [Named("aaaaaa111111", {"x": "v" * 40 + "1"}),
             Named("bbbbbb222222", {"x": "v" * 40 + "2"}), Named("cccccc333333", {"x": "other"})]
    names = short_names(cells)
    assert names["aaaaaa111111"] == "v" * 23 + "… [aaaaaa]"
    assert names["bbbbbb222222"] == "v" * 23 + "… [bbbbbb]"
    assert names["cccccc333333"] == "other"
    # Ids alike in their first characters: the whole id.
    same = [Named("abcdef000001", {"x": "y" * 30 + "1"}),
            Named("abcdef000002", {"x": "y" * 30 + "2"})]
    assert set(short_names(same).values()) == {"y" * 23 + "… [abcdef000001]",
                                               "y" * 23 + "… [abcdef000002]"}


def test_short_names_of_odd_unicode_stay_one_readable_line() -> None:
    cells = [Named("a", {"model": "Qwen\u200b2.5\n7B\t\u202einstruct"}),
             Named("b", {"model": "模型-β 🚀"}), Named("c", {"model": "\udcff x"})]
    names = short_names(cells)
    assert names == {"a": "Qwen 2.5 7B instruct", "b": "模型-β 🚀", "c": "x"}
    for name in names.values():
        name.encode("utf-8")  # no lone surrogate reaches MLflow


def test_short_names_cut_long_values_and_long_names() -> None:
    cells = _grid(prompt=["p" * 5000, "q" * 5000], **{f"a{i}": ["x" * 30, "y" * 30]
                                                       for i in range(6)})
    names = short_names(cells)
    # Cut at MAX_SHORT_NAME; names that the cut made alike end with the cell's id.
    assert all(len(n) <= MAX_SHORT_NAME + len(" [000000]") for n in names.values())
    assert all(n.startswith(("p" * 23 + "…", "q" * 23 + "…")) for n in names.values())
    assert len(set(names.values())) == len(cells)


def test_params_flatten_with_dots() -> None:
    settings = {
        "algorithm": {"name": "grpo", "clip": {"low": 0.2, "high": 0.28}},
        "seed": 0,
        "flags": [1, 2],
        "empty": {},
        "none": None,
        "ok": True,
    }
    assert settings_params(settings) == {
        "algorithm.name": "grpo",
        "algorithm.clip.low": "0.2",
        "algorithm.clip.high": "0.28",
        "seed": "0",
        "flags": "[1,2]",
        "empty": "{}",
        "none": "null",
        "ok": "true",
    }


def test_params_of_a_pydantic_model() -> None:
    class Inner(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        lr: float = 0.5

    class Settings(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        optim: Inner = Inner()
        steps: int = 3

    assert settings_params(Settings()) == {"optim.lr": "0.5", "steps": "3"}


def test_long_values_and_odd_keys_fit_mlflow() -> None:
    params = settings_params({"prompt": "x" * 10_000, "a@b": 1, "k" * 400: 2})
    assert len(params["prompt"]) == MAX_PARAM_VALUE_LENGTH
    assert params["prompt"].endswith(TRUNCATED)
    assert params["a_b"] == "1"
    assert all(len(k) <= MAX_KEY_LENGTH for k in params)
    assert clip("short", 10) == "short"
    assert safe_key("val-core/gsm8k/acc/mean@8") == "val-core/gsm8k/acc/mean_8"


def test_cell_tags() -> None:
    tags = cell_tags(
        {"algorithm": "grpo", "seed": 2},
        {"algorithm": "GRPO"},
        cell_id="0123456789ab",
        sweep_name="toy",
        git_commit="abc",
    )
    assert tags == {
        "axis.algorithm": "GRPO",
        "axis.seed": "2",
        "kappa.cell_id": "0123456789ab",
        "kappa.sweep": "toy",
        "kappa.git_commit": "abc",
    }
    assert "kappa.git_commit" not in cell_tags({}, {}, cell_id="c", sweep_name="s", git_commit=None)


def test_batches_respect_the_limit() -> None:
    items = {f"k{i}": "v" for i in range(250)}
    chunks = list(batches(items))
    assert [len(c) for c in chunks] == [100, 100, 50]
    assert dict(pair for chunk in chunks for pair in chunk) == items
