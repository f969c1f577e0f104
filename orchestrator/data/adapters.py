"""One small adapter per dataset (:data:`DATASETS`): where it lives, which fields hold what
(a local file must use the hub's), how it is split. ``data_source`` is what verl's reward
dispatch and ``val-core/<data_source>/...`` use (kappa_verl.rewards maps ``amc23``,
``olympiadbench`` and ``math500`` to verl's scorers)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.data.records import is_integer_answer, normalise_answer

# DAPO's own instruction (its prompts already contain it); integer-answer sets reuse it so
# verl's math_dapo scorer ("Answer: X" or \boxed{}) reads the answer.
ANSWER_LINE = (
    "Solve the following math problem step by step. The last line of your response should "
    "be of the form Answer: $Answer (without quotes) where $Answer is the answer to the "
    "problem.\n\n{question}\n\nRemember to put your answer on its own line after \"Answer:\"")
BOXED = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."

Extract = Callable[[Mapping[str, Any]], tuple[str, str] | None]
TokenCounter = Callable[[str], int]


def _field(row: Mapping[str, Any], dotted: str) -> Any:
    value: Any = row
    for part in dotted.split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
            items = value.tolist() if hasattr(value, "tolist") else value
            value = items[int(part)] if len(items) > int(part) else None
        else:
            return None
    return value


def fields(question: str, answer: str) -> Extract:
    """An extractor reading two (dotted) fields; rows missing either are dropped."""

    def extract(row: Mapping[str, Any]) -> tuple[str, str] | None:
        q, a = _field(row, question), _field(row, answer)
        if q is None or a is None or (isinstance(a, str) and not a.strip()):
            return None
        return str(q), normalise_answer(a)

    return extract


def _olympiad(row: Mapping[str, Any]) -> tuple[str, str] | None:
    question, answer = row.get("question"), row.get("final_answer")
    if not question or answer is None or len(answer) == 0:
        return None
    context = row.get("context")
    text = f"{context}\n\n{question}" if context else str(question)
    return text, normalise_answer(list(answer) if not isinstance(answer, str) else answer)


@dataclass(frozen=True)
class Split:
    """An output split: rows ``[start, stop)`` of the filtered problems."""

    name: str
    start: int = 0
    stop: int | None = None


@dataclass(frozen=True)
class DatasetAdapter:
    """How to turn one dataset into verl rows."""

    name: str
    hub_id: str
    hub_split: str
    data_source: str
    extract: Extract
    template: str
    splits: tuple[Split, ...] = (Split("test"),)
    hub_config: str | None = None
    integer_answers_only: bool = False
    max_prompt_tokens: int | None = None
    deduplicate: bool = False
    prompt_is_final: bool = False  # only DAPO, whose prompts already carry the instruction

    def problems(self, rows: Iterable[Mapping[str, Any]],
                 count_tokens: TokenCounter) -> list[tuple[str, str]]:
        """(prompt text, answer) pairs after extraction, filters and de-duplication."""
        seen: set[str] = set()
        kept: list[tuple[str, str]] = []
        for row in rows:
            pair = self.extract(row)
            if pair is None:
                continue
            question, answer = pair
            prompt = question if self.prompt_is_final else self.template.format(question=question)
            if self.integer_answers_only and not is_integer_answer(answer):
                continue
            if self.max_prompt_tokens is not None and count_tokens(prompt) > self.max_prompt_tokens:
                continue
            if self.deduplicate:
                if prompt in seen:
                    continue
                seen.add(prompt)
            kept.append((prompt, answer))
        return kept


def _benchmark(name: str, hub_id: str, question: str, template: str,
               hub_split: str = "test") -> DatasetAdapter:
    """A benchmark whose ``data_source`` is its name and whose answer field is ``answer``."""
    return DatasetAdapter(name=name, hub_id=hub_id, hub_split=hub_split, data_source=name,
                          extract=fields(question, "answer"), template=template)


DATASETS: dict[str, DatasetAdapter] = {dataset.name: dataset for dataset in (
    # The first paper's: integer answers, prompt <= 1024 tokens, first 10k train, next 1k val; the
    # hub copy repeats each prompt, so duplicates are dropped (our choice).
    DatasetAdapter(
        name="dapo-math-17k", hub_id="BytedTsinghua-SIA/DAPO-Math-17k", hub_split="train",
        data_source="math_dapo", extract=fields("prompt.0.content", "reward_model.ground_truth"),
        template=ANSWER_LINE, prompt_is_final=True,
        splits=(Split("train", 0, 10_000), Split("val", 10_000, 11_000)),
        integer_answers_only=True, max_prompt_tokens=1024, deduplicate=True),
    _benchmark("amc23", "math-ai/amc23", "question", ANSWER_LINE),
    _benchmark("aime24", "HuggingFaceH4/aime_2024", "problem", ANSWER_LINE, hub_split="train"),
    _benchmark("aime25", "math-ai/aime25", "problem", ANSWER_LINE),
    _benchmark("math500", "HuggingFaceH4/MATH-500", "problem", BOXED),
    DatasetAdapter(  # physics, open-ended, English, text-only
        name="olympiadbench", hub_id="Hothan/OlympiadBench", hub_split="train",
        hub_config="OE_TO_physics_en_COMP", data_source="olympiadbench",
        extract=_olympiad, template=BOXED),
)}
