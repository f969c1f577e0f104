"""verl's parquet row format, one row per problem (docs/verl.md#data-format), and the
answer normalisation every adapter shares."""

from __future__ import annotations

import re
from typing import Any

# verl's columns, in its order.
VERL_COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")
_INTEGER = re.compile(r"[+-]?\d+")
_INTEGRAL_FLOAT = re.compile(r"([+-]?\d+)\.0*")


def normalise_answer(value: Any) -> str:
    """A ground truth as verl's scorers expect it: a string, ``72.0`` -> ``72``, lists joined."""
    if isinstance(value, (list, tuple)):
        return ", ".join(normalise_answer(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = str(value).strip()
    match = _INTEGRAL_FLOAT.fullmatch(text)
    return match.group(1) if match else text


def is_integer_answer(answer: str) -> bool:
    """Whether ``answer`` is a plain integer (the first paper's DAPO-Math filter)."""
    return _INTEGER.fullmatch(answer.strip()) is not None


def verl_row(data_source: str, prompt_text: str, answer: str, index: int,
             split: str) -> dict[str, Any]:
    """One row of verl's RL parquet format for a single-turn math problem."""
    return {"data_source": data_source, "prompt": [{"role": "user", "content": prompt_text}],
            "ability": "math", "reward_model": {"style": "rule", "ground_truth": answer},
            "extra_info": {"index": index, "split": split}}
