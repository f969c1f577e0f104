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
from collections.abc import Mapping
from typing import Any

REWARD_TYPES: tuple[str, ...] = ("verifier", "random")
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


def bernoulli_half(seed: int, sample_index: object, solution_str: str) -> bool:
    """A fair coin that depends only on (seed, prompt index, response text).

    verl scores in several worker processes with their own RNG state and passes no step
    number, so the draw is a hash, not an RNG: the same response of the same prompt under
    the same seed always gets the same reward, in any worker, on any node.
    """
    digest = hashlib.blake2b(
        f"{seed}\x1f{sample_index}\x1f{solution_str}".encode(), digest_size=8
    ).digest()
    return digest[0] & 1 == 1


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
    ``reward_incorrect`` (the κ setting's ``r⁺``/``r⁻``). ``reward_type="random"``:
    Bernoulli(0.5) independent of correctness, seeded from ``seed``,
    ``extra_info["index"]`` and the response text, mapped to the same ``r⁺``/``r⁻``.
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
        index = (extra_info or {}).get("index", "")
        rewarded = bernoulli_half(int(seed), index, solution_str)
    else:
        rewarded = correct
    score = float(reward_correct) if rewarded else float(reward_incorrect)
    return {"score": score, "acc": float(correct)}
