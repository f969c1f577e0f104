"""Scoring a policy on benchmark problems: greedy accuracy, mean@k and unbiased pass@k;
:func:`evaluate` is a run's final evaluation."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from orchestrator.backends.embedded.model import TinyGPT, generate
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.tasks import TASKS, TOKENIZER, Problem, Task, stable_seed

_CHUNK = 512  # prompts per generate call; bounds memory on large eval sets


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct: 1 − C(n−c, k)/C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def correct_counts(model: TinyGPT, task: Task, problems: Sequence[Problem], samples: int,
                   max_new_tokens: int, temperature: float, generator: torch.Generator | None,
                   greedy: bool = False) -> list[int]:
    """How many of ``samples`` responses to each problem the verifier accepts."""
    prompts = [TOKENIZER.encode_prompt(p.prompt) for p in problems for _ in range(samples)]
    owners = [i for i in range(len(problems)) for _ in range(samples)]
    counts = [0] * len(problems)
    was_training = model.training
    model.eval()
    for start in range(0, len(prompts), _CHUNK):
        seqs = generate(model, prompts[start:start + _CHUNK], max_new_tokens, temperature,
                        generator, greedy=greedy)
        for row, ids in enumerate(seqs.responses.tolist()):
            owner = owners[start + row]
            counts[owner] += task.verify(TOKENIZER.decode(ids), problems[owner])
    model.train(was_training)
    return counts


def greedy_accuracy(model: TinyGPT, task: Task, problems: Sequence[Problem],
                    max_new_tokens: int) -> float:
    """Fraction of problems whose greedy response is correct (pass@1 at temperature 0)."""
    counts = correct_counts(model, task, problems, 1, max_new_tokens, 1.0, None, greedy=True)
    return sum(counts) / max(len(problems), 1)


def evaluate(settings: EmbeddedSettings, policy: TinyGPT) -> dict[str, float]:
    """Every benchmark's ``eval/<benchmark>/`` greedy accuracy, mean@k and pass@k
    (k = ``eval_samples``); only the validation set's is under ``val-core/`` too, so a run's
    "validation accuracy" is one metric."""
    task = TASKS[settings.task]
    device = next(policy.parameters()).device
    k, length = settings.eval_samples, settings.max_response_length
    scores: dict[str, float] = {}
    for benchmark in settings.benchmarks or task.benchmarks:
        generator = torch.Generator(device=device)
        generator.manual_seed(stable_seed("eval", settings.seed, benchmark))
        problems = task.benchmark(benchmark, settings.val_size)
        greedy = greedy_accuracy(policy, task, problems, length)
        counts = correct_counts(policy, task, problems, k, length, settings.eval_temperature,
                                generator)
        n = max(len(problems), 1)
        scores |= {f"eval/{benchmark}/greedy@1": greedy,
                   f"eval/{benchmark}/mean@{k}": sum(c / k for c in counts) / n,
                   f"eval/{benchmark}/pass@{k}": sum(pass_at_k(k, c, k) for c in counts) / n}
        if benchmark == task.val_benchmark:
            scores[f"val-core/{benchmark}/acc/mean@1"] = greedy
    return scores
