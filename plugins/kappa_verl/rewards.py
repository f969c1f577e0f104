"""kappa's reward function for verl: κ-scaled verifier rewards and random (spurious) rewards.

verl loads this file *by path* (``reward.custom_reward_function.path``) inside its
``RewardLoopWorker`` actors and calls ``compute_score(data_source=, solution_str=,
ground_truth=, extra_info=, **reward_kwargs)`` once per response. The result always carries
``acc`` (the true 0/1 correctness) separately from ``score`` (the training reward), so
``val-core/<source>/acc/...`` stays the real accuracy whatever the reward variant.

Keep this module importable on its own: absolute imports only, no package-relative ones.
"""

from __future__ import annotations

import hashlib
import operator
from collections import Counter
from collections.abc import Mapping
from typing import Any

import torch

from orchestrator.algorithms.rewards import random_rewards, scale_rewards

REWARD_TYPES: tuple[str, ...] = ("verifier", "random")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# data_source names written by `kappa data prepare` that verl's default_compute_score does
# not dispatch on, mapped to the verl source whose scorer fits the answer format
# (integer answers after "Answer:" or in \boxed{} -> math_dapo; symbolic \boxed{} answers
# -> the MATH scorer). The name itself stays the metric prefix (val-core/<name>/...).
SCORER_ALIASES: dict[str, str] = {
    "amc23": "math_dapo",
    "math500": "HuggingFaceH4/MATH-500",
    "olympiadbench": "HuggingFaceH4/MATH-500",
}


def is_correct(data_source: str, solution_str: str, ground_truth: str,
               extra_info: Mapping[str, Any] | None = None) -> bool:
    """Whether ``solution_str`` answers ``ground_truth``, by verl's ``default_compute_score``.

    verl's scorers return either a float (1/0) or a dict with ``acc`` (math_dapo scores
    wrong answers −1), so correctness is ``acc`` when present, else ``score > 0``.
    """
    from verl.utils.reward_score import default_compute_score

    source = SCORER_ALIASES.get(data_source, data_source)
    result = default_compute_score(source, solution_str, ground_truth,
                                   extra_info=dict(extra_info) if extra_info else None)
    if isinstance(result, Mapping):
        if "acc" in result:
            return bool(result["acc"])
        return float(result["score"]) > 0
    return float(result) > 0


def prompt_id(sample_index: object) -> int:
    """The prompt id of :func:`~orchestrator.algorithms.rewards.random_rewards`.

    It is ``extra_info["index"]``: ``kappa data prepare`` writes an integer index; an
    integer-like string is read as that integer; anything else (another tool's string id,
    an integer beyond int64) as a stable hash of its text; a missing index as 0.
    """
    if sample_index is None or sample_index == "":
        return 0
    value: int | None
    try:
        value = operator.index(sample_index)  # type: ignore[arg-type]
    except TypeError:
        text = str(sample_index).strip()
        value = int(text) if text.lstrip("-").isdigit() else None
    if value is not None and _INT64_MIN <= value <= _INT64_MAX:
        return value
    return text_index(str(sample_index))


def text_index(text: str) -> int:
    """A stable non-negative 63-bit integer of ``text`` (fits torch's int64)."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


# Coins drawn so far in this process, per prompt id (see :func:`random_coin`).
_draws: Counter[int] = Counter()


def reset_draws() -> None:
    """Forget the coins drawn so far (the next draw of every prompt is its first again)."""
    _draws.clear()


def random_coin(seed: int, sample_index: object, solution_str: str) -> bool:
    """The spurious reward's fair coin for one response, by ``orchestrator.algorithms``.

    ``random_rewards(prompt id, response index, seed)`` with the prompt id from
    ``extra_info["index"]`` (:func:`prompt_id`). verl passes neither the response's place
    in its group nor a step, so the response index is a hash of how many coins this
    process has drawn for the prompt so far, together with the text. The draw count makes
    a repeated response draw a fresh coin: a coin fixed by the text alone would be a
    learnable function of the response (a policy could settle on its "lucky" answer),
    not the paper's reward independent of the response. The text keeps two workers that
    score one group apart. One process scoring in a fixed order draws the same coins.
    """
    prompt = prompt_id(sample_index)
    draw = _draws[prompt]
    _draws[prompt] += 1
    coins = random_rewards(torch.tensor([prompt]),
                           torch.tensor([text_index(f"{draw}\x00{solution_str}")]), int(seed))
    return bool(coins.item())


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    reward_correct: float = 1.0,
    reward_incorrect: float = 0.0,
    reward_type: str = "verifier",
    seed: int = 0,
    **_unused: Any,
) -> dict[str, float]:
    """The reward of one response: ``{"score": training reward, "acc": true correctness}``.

    ``reward_type="verifier"``: ``reward_correct`` if the answer is right, else
    ``reward_incorrect`` (the κ setting's ``r⁺``/``r⁻``, by
    :func:`orchestrator.algorithms.rewards.scale_rewards`). ``reward_type="random"``: Bernoulli(0.5)
    independent of correctness (:func:`random_coin`, i.e.
    :func:`orchestrator.algorithms.rewards.random_rewards`), mapped to the same ``r⁺``/``r⁻``.
    Extra keyword arguments verl may add are ignored.
    """
    if reward_type not in REWARD_TYPES:
        raise ValueError(
            f"kappa_verl.rewards: unknown reward_type {reward_type!r}; known: "
            f"{', '.join(REWARD_TYPES)} (set +reward.custom_reward_function.reward_kwargs."
            "reward_type)"
        )
    correct = is_correct(data_source, solution_str, ground_truth, extra_info)
    if reward_type == "random":
        rewarded = random_coin(int(seed), (extra_info or {}).get("index"), solution_str)
    else:
        rewarded = correct
    score = scale_rewards(torch.tensor([rewarded]), float(reward_correct),
                          float(reward_incorrect))
    return {"score": float(score.item()), "acc": float(correct)}
