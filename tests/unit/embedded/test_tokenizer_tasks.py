"""Tokenizer, task generation and verifier."""

from __future__ import annotations

import statistics

import pytest

from orchestrator.backends.embedded.tasks import (
    BOS,
    EOS,
    PAD,
    TASKS,
    TOKENIZER,
    extract_answer,
)


def test_tokenizer_round_trip_and_specials() -> None:
    text = "73+54+20=280,490"
    ids = TOKENIZER.encode(text)
    assert len(ids) == len(text)
    assert min(ids) > EOS  # specials are never produced by encode
    assert TOKENIZER.decode(ids) == text
    assert TOKENIZER.encode_prompt("1+2=")[0] == BOS
    assert TOKENIZER.decode([*TOKENIZER.encode("12"), EOS, *TOKENIZER.encode("34")]) == "12"
    assert TOKENIZER.decode([PAD, BOS, *TOKENIZER.encode("5")]) == "5"


def test_tokenizer_rejects_unknown_characters() -> None:
    with pytest.raises(ValueError, match="not in the tokenizer alphabet"):
        TOKENIZER.encode("1+x")


@pytest.mark.parametrize("name", sorted(TASKS))
def test_problems_are_deterministic_and_correct(name: str) -> None:
    task = TASKS[name]
    first = task.train_problems(seed=7, n=50)
    assert first == task.train_problems(seed=7, n=50)
    assert first != task.train_problems(seed=8, n=50)
    for problem in first + [p for b in task.benchmarks for p in task.benchmark(b, 50)]:
        # Little-endian, fixed width: reverse every number to check the arithmetic.
        operands = [int(x[::-1]) for x in problem.prompt.rstrip("=").split("+")]
        sums = [int(x[::-1]) for x in problem.solution.split(",")]
        assert sums[-1] == sum(operands)
        assert sums == [sum(operands[: i + 2]) for i in range(len(operands) - 1)]
        assert task.verify(problem.solution, problem)
        assert len(problem.prompt) <= task.max_prompt_length
        assert len(problem.solution) <= task.max_solution_length


def test_arithmetic_answers_are_worked_and_long_enough() -> None:
    task = TASKS["arithmetic"]
    lengths = [len(p.solution) + 1 for p in task.train_problems(0, 500)]  # + EOS
    assert statistics.mean(lengths) >= 8


def test_benchmarks_fixed_distinct_and_held_out_of_training() -> None:
    task = TASKS["addition"]
    val = task.benchmark(task.val_benchmark, 100)
    assert val == task.benchmark(task.val_benchmark, 100)
    assert len({p.prompt for p in val}) == 100
    held = task.held_out_prompts(100)
    train = task.train_problems(0, 2000, exclude=held)
    assert not {p.prompt for p in train} & held
    # Without the exclusion the small two-operand space does overlap the val set.
    assert {p.prompt for p in task.train_problems(0, 2000)} & held


def test_verifier_extracts_the_last_field() -> None:
    task = TASKS["arithmetic"]
    problem = task.train_problems(3, 1)[0]
    assert task.verify(f"999,{problem.answer}", problem)
    assert not task.verify(f"{problem.answer},999", problem)
    assert not task.verify("", problem)
    assert extract_answer("12,3a") is None
    assert extract_answer("12, 34") == "34"


def test_unknown_benchmark_lists_known() -> None:
    from orchestrator.errors import UserInputError

    with pytest.raises(UserInputError, match="arith-val"):
        TASKS["arithmetic"].benchmark("arith-impossible", 3)
