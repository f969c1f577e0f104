"""Run names, tags and params of a cell (pure functions, no MLflow)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from orchestrator.tracking.naming import (
    MAX_KEY_LENGTH,
    MAX_PARAM_VALUE_LENGTH,
    TRUNCATED,
    batches,
    cell_tags,
    clip,
    run_name,
    safe_key,
    settings_params,
)


def test_run_name_reads_like_the_table_row() -> None:
    axes = {"algorithm": "grpo", "rb": True, "seed": 0}
    assert run_name(axes, {}) == "grpo · rb=true · seed=0"


def test_run_name_prefers_labels() -> None:
    axes = {"kappa": {"kl_coef": 0.1}, "seed": 1}
    assert run_name(axes, {"kappa": "k200"}) == "k200 · seed=1"
    # A non-mapping labels value is ignored rather than trusted.
    assert run_name({"clip": 0.2}, ["x"]) == "clip=0.2"
    assert run_name({}, {}) == "cell"


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
