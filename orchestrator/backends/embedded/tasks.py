"""Synthetic tasks with verifiable answers, each with difficulty levels ("benchmarks"), generated
deterministically: training prompts from the cell's seed, benchmarks from a fixed seed each (every
cell is scored on the same problems). A response is the running partial sums, comma-separated
(``37+45+12=`` -> ``82,94``); the verifier takes the last, like ``\\boxed{}`` extraction. Numbers
are zero-padded and least-significant digit first (``37+45+2`` is ``73+54+20=`` -> ``280,490``),
so a carry flows in reading order: a tiny causal model learns it in a few hundred steps. One
character is one token, plus PAD/BOS/EOS."""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

PAD, BOS, EOS = 0, 1, 2
_SPECIALS = ("<pad>", "<bos>", "<eos>")
# Every character any task may put in a prompt or an answer.
ALPHABET = "0123456789+-*=,"
_TO_ID = {ch: i + len(_SPECIALS) for i, ch in enumerate(ALPHABET)}


class CharTokenizer:
    """Maps the characters of :data:`ALPHABET` to ids; ids 0..2 are PAD, BOS and EOS."""

    vocab_size = len(_SPECIALS) + len(ALPHABET)  # distinct ids, specials included

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; a character outside the alphabet raises ``ValueError``."""
        try:
            return [_TO_ID[ch] for ch in text]
        except KeyError as exc:
            raise ValueError(
                f"character {exc.args[0]!r} is not in the tokenizer alphabet") from None

    def encode_prompt(self, text: str) -> list[int]:
        """``BOS`` followed by the ids of ``text``: what the model conditions on."""
        return [BOS, *self.encode(text)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` up to (excluding) the first EOS; PAD and BOS are dropped."""
        return "".join(ALPHABET[i - len(_SPECIALS)]
                       for i in itertools.takewhile(lambda i: i != EOS, ids)
                       if i >= len(_SPECIALS))


TOKENIZER = CharTokenizer()


@dataclass(frozen=True)
class Problem:
    """One prompt with its ground-truth answer and the worked solution used for warm start."""

    prompt: str
    answer: str
    solution: str


@dataclass(frozen=True)
class Level:
    """A difficulty level: how many operands and how many digits each has."""

    name: str
    min_operands: int
    max_operands: int
    min_digits: int
    max_digits: int


def stable_seed(*parts: object) -> int:
    """A 63-bit seed derived from ``parts`` that is the same in every process and platform."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def extract_answer(response: str) -> str | None:
    """The final answer of a worked response (its last comma-separated field), if numeric."""
    last = response.rsplit(",", 1)[-1].strip()
    return last if last.isdigit() else None


@dataclass(frozen=True)
class AdditionTask:
    """Multi-operand addition with partial sums as the worked answer. ``levels[0]`` is the training
    distribution and its validation benchmark; later levels are harder held-out benchmarks."""

    name: str
    levels: tuple[Level, ...]

    @staticmethod
    def _fmt(value: int, width: int) -> str:
        return str(value).zfill(width)[::-1]  # fixed width, least-significant digit first

    @property
    def benchmarks(self) -> tuple[str, ...]:
        """Benchmark names, the validation benchmark first."""
        return tuple(level.name for level in self.levels)

    @property
    def val_benchmark(self) -> str:
        """The in-distribution benchmark used for validation during training."""
        return self.levels[0].name

    @property
    def max_prompt_length(self) -> int:
        """Longest prompt in characters (BOS not included)."""
        return max(lv.max_operands * (lv.max_digits + 1) for lv in self.levels)

    @property
    def max_solution_length(self) -> int:
        """Longest worked solution in characters (EOS not included): ``operands − 1`` sums of
        ``max_digits + 1`` digits, comma-separated."""
        return max((lv.max_digits + 2) * (lv.max_operands - 1) - 1 for lv in self.levels)

    def _level(self, name: str) -> Level:
        for level in self.levels:
            if level.name == name:
                return level
        from orchestrator.errors import unknown_name

        raise unknown_name("benchmark", name, self.benchmarks, location="benchmarks")

    def _make(self, level: Level, rng: random.Random) -> Problem:
        count = rng.randint(level.min_operands, level.max_operands)
        operands = []
        for _ in range(count):
            digits = rng.randint(level.min_digits, level.max_digits)
            low = 0 if digits == 1 else 10 ** (digits - 1)
            operands.append(rng.randint(low, 10**digits - 1))
        partial, sums = operands[0], []
        for value in operands[1:]:
            partial += value
            sums.append(self._fmt(partial, level.max_digits + 1))
        prompt = "+".join(self._fmt(v, level.max_digits) for v in operands) + "="
        return Problem(prompt=prompt, answer=sums[-1], solution=",".join(sums))

    def train_problems(self, seed: int, n: int,
                       exclude: frozenset[str] = frozenset()) -> list[Problem]:
        """``n`` training problems from the first level, skipping prompts in ``exclude``."""
        rng = random.Random(seed)
        out: list[Problem] = []
        while len(out) < n:
            problem = self._make(self.levels[0], rng)
            if problem.prompt not in exclude:
                out.append(problem)
        return out

    def benchmark(self, name: str, n: int) -> list[Problem]:
        """The first ``n`` problems of benchmark ``name`` (distinct prompts, fixed seed)."""
        level = self._level(name)
        rng = random.Random(stable_seed("benchmark", self.name, name))
        found: dict[str, Problem] = {}
        for _ in range(50 * n):
            if len(found) >= n:
                break
            problem = self._make(level, rng)
            found.setdefault(problem.prompt, problem)
        return list(found.values())

    def held_out_prompts(self, n: int) -> frozenset[str]:
        """Prompts of every benchmark's first ``n`` problems; training never shows them."""
        return frozenset(p.prompt for b in self.benchmarks for p in self.benchmark(b, n))

    def verify(self, response: str, problem: Problem) -> bool:
        """Whether the response's extracted final answer equals the ground truth."""
        return extract_answer(response) == problem.answer


Task = AdditionTask

TASKS: dict[str, Task] = {task.name: task for task in (
    # The easiest task: two or three small operands.
    AdditionTask("addition", (Level("add-val", 2, 3, 1, 2), Level("add-hard", 3, 3, 2, 2),
                              Level("add-harder", 4, 4, 2, 2))),
    # The main toy task: three or four operands of up to two digits; harder held-out sets.
    AdditionTask("arithmetic", (Level("arith-val", 3, 4, 1, 2), Level("arith-hard", 4, 4, 2, 2),
                                Level("arith-harder", 5, 5, 2, 2))),
)}
