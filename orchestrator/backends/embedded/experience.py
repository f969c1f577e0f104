"""One RL step's experience: prompts, sampled groups, rewards, advantages, old log-probs.

Order of reward shaping (ALGORITHMS.md §3–§5): the verifier's (or a spurious coin's)
correct/incorrect becomes ``reward_correct``/``reward_incorrect`` (the κ setting), then
DAPO's over-long penalty, then the entropy reward while that intervention is active; the
advantage construction (GRPO, Dr.GRPO or reward budgeting) sees the result. DAPO's dynamic
sampling keeps groups whose accuracy varies (verl's ``filter_groups.metric=acc``) and
samples again, up to ``max_sampling_attempts`` rounds, until the batch is full.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from orchestrator import algorithms as alg
from orchestrator.backends.embedded.model import TinyGPT
from orchestrator.backends.embedded.rollout import (
    Sequences,
    generate,
    pack,
    response_logits,
    token_log_probs,
)
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.tasks import Problem, Task, stable_seed
from orchestrator.backends.embedded.tokenizer import TOKENIZER


@dataclass(frozen=True)
class Experience:
    """A training batch of ``groups × G`` responses; row ``g·G + i`` is response i of group g."""

    seqs: Sequences
    group_index: torch.Tensor  # (N,)
    correct: torch.Tensor  # (N,) bool, what the verifier (or the coin) said
    rewards: torch.Tensor  # (groups, G) after every shaping term
    advantages: torch.Tensor  # (N, R) on response tokens
    old_log_prob: torch.Tensor  # (N, R) under the rollout policy
    ref_log_prob: torch.Tensor | None  # (N, R) under the frozen reference, if KL is used
    entropy: torch.Tensor  # (N, R) token entropy under the rollout policy
    attempts: int
    sampled_tokens: int  # every token generated this step, dropped groups included

    @property
    def groups(self) -> int:
        """Number of prompts (groups) in the batch."""
        return int(self.rewards.shape[0])


def _correctness(settings: EmbeddedSettings, task: Task, seqs: Sequences, problems: list[Problem],
                 prompt_ids: torch.Tensor) -> torch.Tensor:
    g = settings.group_size
    if settings.reward_type == "random":
        coins = alg.random_rewards(prompt_ids[:, None], torch.arange(g)[None, :], settings.seed)
        return coins.reshape(-1).bool()
    texts = [TOKENIZER.decode(ids) for ids in seqs.responses.tolist()]
    return torch.tensor([task.verify(t, problems[i // g]) for i, t in enumerate(texts)])


def collect(settings: EmbeddedSettings, task: Task, policy: TinyGPT, ref: TinyGPT | None,
            step: int, held_out: frozenset[str]) -> Experience:
    """Sample, score and (for DAPO) filter groups until the batch is full; then score tokens."""
    algo = settings.algorithm
    device = next(policy.parameters()).device
    g, want = settings.group_size, settings.prompts_per_step
    attempts_cap = settings.max_sampling_attempts if algo.dynamic_sampling else 1
    prompts: list[list[int]] = []
    responses: list[list[int]] = []
    correct_parts: list[torch.Tensor] = []
    kept = sampled_tokens = attempts = 0
    policy.eval()
    while kept < want and attempts < attempts_cap:
        problems = task.train_problems(stable_seed("prompts", settings.seed, step, attempts),
                                       want, held_out)
        ids = torch.tensor([(step * attempts_cap + attempts) * want + i for i in range(want)])
        generator = torch.Generator(device=device)
        generator.manual_seed(stable_seed("sample", settings.seed, step, attempts))
        encoded = [TOKENIZER.encode_prompt(p.prompt) for p in problems for _ in range(g)]
        seqs = generate(policy, encoded, settings.max_response_length, settings.temperature,
                        generator)
        attempts += 1
        sampled_tokens += int(seqs.response_mask.sum().item())
        correct = _correctness(settings, task, seqs, problems, ids).reshape(want, g)
        keep = (alg.dynamic_sampling_keep(correct.float()) if algo.dynamic_sampling
                else torch.ones(want, dtype=torch.bool))
        lengths = seqs.response_lengths.long().reshape(want, g)
        for group in torch.nonzero(keep).flatten().tolist()[: want - kept]:
            for i in range(group * g, group * g + g):
                prompts.append(encoded[i])
                responses.append(seqs.responses[i, : int(lengths.flatten()[i])].tolist())
            correct_parts.append(correct[group])
            kept += 1
    policy.train()
    if kept == 0:
        raise NothingKept(attempts, sampled_tokens)
    return _score(settings, policy, ref, step, pack(prompts, responses, device),
                  torch.stack(correct_parts), attempts, sampled_tokens)


class NothingKept(Exception):
    """Dynamic sampling found no group with mixed outcomes within its attempts."""

    def __init__(self, attempts: int, sampled_tokens: int) -> None:
        super().__init__(f"no group kept after {attempts} sampling attempts")
        self.attempts = attempts
        self.sampled_tokens = sampled_tokens


@torch.no_grad()
def _score(settings: EmbeddedSettings, policy: TinyGPT, ref: TinyGPT | None, step: int,
           seqs: Sequences, correct: torch.Tensor, attempts: int,
           sampled_tokens: int) -> Experience:
    algo = settings.algorithm
    groups, g = correct.shape
    mask = seqs.response_mask
    logits = response_logits(policy, seqs, settings.temperature)
    old_log_prob = token_log_probs(logits, seqs.responses)
    entropy = alg.entropy_from_logits(logits)
    ref_log_prob = None
    if ref is not None:
        ref_log_prob = token_log_probs(response_logits(ref, seqs, settings.temperature),
                                       seqs.responses)
    # Rewards and advantages are small per-response tensors: kept on the CPU.
    rewards = alg.scale_rewards(correct, settings.reward_correct, settings.reward_incorrect)
    if algo.overlong_penalty and settings.overlong_buffer > 0:
        cache = min(settings.overlong_buffer, settings.max_response_length)
        rewards = rewards + alg.overlong_penalty(
            seqs.response_lengths.cpu().reshape(groups, g), settings.max_response_length, cache,
            settings.overlong_penalty_factor)
    if settings.entropy_intervention == "entropy_reward" and settings.intervention_active(step):
        seq_entropy = alg.masked_mean(entropy, mask, dim=-1).cpu().reshape(groups, g)
        rewards = alg.entropy_reward(rewards, seq_entropy, settings.entropy_coef)
    options = {"std": algo.advantage_std} if algo.advantage == "grpo" else {}
    adv = alg.advantages(algo.advantage, rewards, **options)
    return Experience(
        seqs=seqs,
        group_index=torch.arange(groups).repeat_interleave(g),
        correct=correct.reshape(-1),
        rewards=rewards,
        advantages=alg.broadcast_to_tokens(adv.reshape(-1).to(mask.device), mask),
        old_log_prob=old_log_prob,
        ref_log_prob=ref_log_prob,
        entropy=entropy,
        attempts=attempts,
        sampled_tokens=sampled_tokens,
    )
