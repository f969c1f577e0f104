"""kappa_verl.rewards: κ-scaled verifier rewards and seeded random rewards, loaded the way
verl loads them (by file path, through ``get_custom_reward_fn``, with reward_kwargs)."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")
pytest.importorskip("kappa_verl")

import kappa_verl
import torch
from kappa_verl.rewards import (
    compute_score,
    prompt_id,
    random_coin,
    reset_draws,
    text_index,
)
from omegaconf import OmegaConf
from verl.trainer.ppo.reward import get_custom_reward_fn

from orchestrator.algorithms.rewards import random_rewards, scale_rewards

RIGHT = "The sum is 12, so the answer is \\boxed{42}."
WRONG = "I think the answer is \\boxed{41}."


def _loaded(**reward_kwargs: object):  # type: ignore[no-untyped-def]
    config = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": kappa_verl.reward_function_path(), "name": "compute_score",
        "reward_kwargs": reward_kwargs}}})
    fn = get_custom_reward_fn(config)
    assert fn is not None
    return fn


@pytest.mark.parametrize("source", ["math_dapo", "aime24", "HuggingFaceH4/MATH-500"])
def test_verifier_scales_reward_and_keeps_true_accuracy(source: str) -> None:
    fn = _loaded(reward_correct=5.0, reward_incorrect=0.0)
    right = fn(data_source=source, solution_str=RIGHT, ground_truth="42",
               extra_info={"index": 0})
    wrong = fn(data_source=source, solution_str=WRONG, ground_truth="42",
               extra_info={"index": 0})
    assert right == {"score": 5.0, "acc": 1.0}
    assert wrong == {"score": 0.0, "acc": 0.0}


def test_defaults_are_one_and_zero() -> None:
    assert compute_score("math_dapo", RIGHT, "42") == {"score": 1.0, "acc": 1.0}
    assert compute_score("math_dapo", WRONG, "42") == {"score": 0.0, "acc": 0.0}


@pytest.fixture(autouse=True)
def _fresh_draws() -> None:
    reset_draws()  # the reward module keeps per-process draw counts


def test_random_rewards_ignore_correctness_but_report_it() -> None:
    fn = _loaded(reward_type="random", reward_correct=1.0, reward_incorrect=0.0, seed=7)
    results = [fn(data_source="math_dapo", solution_str=f"{RIGHT} attempt {i}",
                  ground_truth="42", extra_info={"index": i}) for i in range(400)]
    scores = [r["score"] for r in results]
    assert all(r["acc"] == 1.0 for r in results)
    assert 150 < sum(scores) < 250  # Bernoulli(0.5); 400 draws, > 5 sigma margin
    fn.args[0].__globals__["reset_draws"]()  # verl's by-path copy of the module keeps its own
    again = [fn(data_source="math_dapo", solution_str=f"{RIGHT} attempt {i}",
                ground_truth="42", extra_info={"index": i})["score"] for i in range(400)]
    assert again == scores  # reproducible in one process scoring in the same order


def test_a_repeated_response_draws_a_fresh_coin() -> None:
    """Independent of the response: a policy that always answers the same gets no fixed
    reward for it (a coin fixed by the text would be learnable)."""
    coins = [random_coin(3, 0, RIGHT) for _ in range(400)]
    assert 150 < sum(coins) < 250
    reset_draws()
    assert [random_coin(3, 0, RIGHT) for _ in range(400)] == coins


def test_random_rewards_depend_on_seed_index_and_response() -> None:
    def draw(seed: int, text: str) -> list[bool]:
        reset_draws()
        return [random_coin(seed, i, text) for i in range(64)]

    base = draw(0, "x")
    assert base == draw(0, "x")
    assert base != draw(1, "x")
    assert base != draw(0, "y")


@pytest.mark.parametrize("seed", [0, 7, 12345])
def test_random_scores_equal_the_algorithms_library(seed: int) -> None:
    """One implementation: the plug-in's score is random_rewards + scale_rewards exactly."""
    fn = _loaded(reward_type="random", reward_correct=5.0, reward_incorrect=-0.5, seed=seed)
    responses = [f"{WRONG} try {j}" for j in range(8)]
    for index in range(16):
        got = [fn(data_source="math_dapo", solution_str=text, ground_truth="42",
                  extra_info={"index": index})["score"] for text in responses]
        # The j-th coin drawn for a prompt hashes the draw count with the text.
        ids = [text_index(f"{j}\x00{t}") for j, t in enumerate(responses)]
        coins = random_rewards(torch.tensor([[index]]), torch.tensor([ids]), seed)
        assert got == scale_rewards(coins, 5.0, -0.5).reshape(-1).tolist()


def test_verifier_scores_equal_the_algorithms_library() -> None:
    fn = _loaded(reward_correct=0.1, reward_incorrect=-0.3)
    got = [fn(data_source="math_dapo", solution_str=text, ground_truth="42",
              extra_info={"index": 0})["score"] for text in (RIGHT, WRONG)]
    assert got == scale_rewards(torch.tensor([True, False]), 0.1, -0.3).tolist()


def test_prompt_and_response_ids() -> None:
    assert [prompt_id(v) for v in (7, "7", None, "")] == [7, 7, 0, 0]
    assert prompt_id("train-7") == text_index("train-7") != prompt_id("train-8")
    assert prompt_id(2**70) == text_index(str(2**70))  # beyond int64: hashed, not overflowed
    assert 0 <= text_index("any response") < 2**63
    assert text_index("a") == text_index("a") != text_index("b")


def test_unknown_reward_type_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown reward_type 'randm'"):
        compute_score("math_dapo", RIGHT, "42", reward_type="randm")


@pytest.mark.parametrize(("source", "right", "truth"), [
    ("amc23", "so \\boxed{72}", "72"),
    ("math500", "thus \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("olympiadbench", "hence \\boxed{3}", "3"),
])
def test_kappa_data_sources_are_scorable(source: str, right: str, truth: str) -> None:
    """`kappa data prepare` names verl does not dispatch on are scored via SCORER_ALIASES."""
    assert compute_score(source, right, truth)["acc"] == 1.0
    assert compute_score(source, "\\boxed{999}", truth)["acc"] == 0.0
