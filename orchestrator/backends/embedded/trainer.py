"""The embedded RL trainer: warm start, RL steps, final evaluation. An RL step (:func:`rl_step`):
:func:`collect` samples groups, scores them, shapes rewards (docs/algorithms.md#reward-variants)
and builds advantages, DAPO's dynamic sampling resampling up to ``max_sampling_attempts``
rounds for groups whose accuracy varies; :func:`ppo_update` takes ``ppo_mini_batches``
optimizer steps per epoch on the baseline's loss, ``+ β·KL`` to the frozen reference with a KL
loss, ``− c·H`` during the entropy-loss intervention; :func:`kappa_eff` is its sharpening
diagnostic. Rerun in its folder, ``train`` resumes from the newest checkpoint to the same
metrics as an unbroken run: step ``s`` draws from generators seeded by ``(seed, s)``."""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch

from orchestrator.algorithms import diagnostics
from orchestrator.algorithms.advantages import advantages
from orchestrator.algorithms.diagnostics import entropy_from_logits
from orchestrator.algorithms.masking import aggregate, broadcast_to_tokens, masked_mean
from orchestrator.algorithms.policy_losses import kl_penalty, policy_loss
from orchestrator.algorithms.rewards import (
    dynamic_sampling_keep,
    entropy_reward,
    overlong_penalty,
    random_rewards,
    scale_rewards,
)
from orchestrator.backends.embedded.backend import EmbeddedBackend
from orchestrator.backends.embedded.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from orchestrator.backends.embedded.evaluation import evaluate, greedy_accuracy
from orchestrator.backends.embedded.metrics import RunFiles, progress_display
from orchestrator.backends.embedded.model import (
    Sequences,
    TinyGPT,
    frozen_copy,
    generate,
    pack,
    resolve_device,
    response_logits,
    token_log_probs,
)
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.tasks import TASKS, TOKENIZER, Problem, Task, stable_seed
from orchestrator.backends.embedded.warmstart import load_or_build
from orchestrator.runs import provenance
from orchestrator.runs.folder import SUMMARY_FILE
from orchestrator.runs.metrics import last_values
from orchestrator.runs.stop_request import StopPoint, logged_through


def train(settings: EmbeddedSettings, out_dir: Path,
          progress: bool | None = None) -> dict[str, float]:
    """Run one cell to completion in ``out_dir`` (resuming if it was started); final metrics.
    ``progress``: a progress bar (default: when stdout is a terminal), else progress lines."""
    out_dir.mkdir(parents=True, exist_ok=True)
    device = resolve_device(settings.device)
    task = TASKS[settings.task]
    algo = settings.algorithm
    files = RunFiles(out_dir, settings.max_steps)
    (out_dir / SUMMARY_FILE).unlink(missing_ok=True)

    t0 = time.perf_counter()
    warm = load_or_build(settings, device)
    warm_seconds = time.perf_counter() - t0
    # Provenance: the embedded numerics, the base model's weights (their file's SHA-256, first
    # 16 digits: the start every number depends on) and this machine.
    provenance.write(out_dir, EmbeddedBackend().numerics() | {"base_model": warm.sha256[:16]})
    policy = warm.model
    ref = frozen_copy(policy) if algo.use_kl_loss else None
    optimizer = torch.optim.AdamW(policy.parameters(), lr=settings.learning_rate, weight_decay=0.0)
    held_out = task.held_out_prompts(settings.val_size)
    val_problems = task.benchmark(task.val_benchmark, settings.val_size)
    val_key = f"val-core/{task.val_benchmark}/acc/mean@1"

    start, saved = 0, -1  # saved: the step of the newest checkpoint
    if (ckpt := latest_checkpoint(out_dir)) is not None:
        state = load_checkpoint(ckpt, device)
        policy.load_state_dict(state.model)
        optimizer.load_state_dict(state.optimizer)
        restore_rng(state)
        start = saved = state.step
    # Read before the resume cuts metrics.jsonl back: a stop never lands before a step an
    # earlier attempt logged (MLflow has it), so the resumed records match the old ones.
    stopping = StopPoint(out_dir, logged_through(out_dir))
    files.resume_from(saved)
    bar = sys.stdout.isatty() if progress is None else progress
    last = start
    with progress_display(settings.max_steps, start, bar) as advance:
        if start == 0:
            acc = greedy_accuracy(policy, task, val_problems, settings.max_response_length)
            files.log(0, {val_key: acc, "warm_start/val_acc": acc, "warm_start/steps": warm.steps,
                          "warm_start/probe_acc": warm.probe_accuracy,
                          "timing_s/warm_start": warm_seconds})
            advance(0, {val_key: acc})
        for step in range(start, settings.max_steps):
            # A stop request (a stopping rule fired) ends the run at this step boundary,
            # or trains on to the step it was promised at (a resumed attempt).
            if stopping.due(step):
                break
            metrics = rl_step(settings, policy, ref, optimizer, step, held_out)
            done = last = step + 1
            if done % settings.val_every == 0 or done == settings.max_steps:
                metrics[val_key] = greedy_accuracy(policy, task, val_problems,
                                                   settings.max_response_length)
            files.log(done, metrics)
            files.progress(done)
            if done % settings.checkpoint_every == 0 or done == settings.max_steps:
                save_checkpoint(out_dir, done, policy, optimizer)
                saved = done
            advance(done, metrics)
    stop = stopping.request
    if stop is not None:
        print(f"[kappa] stopped at step {last}: {stop.reason}", flush=True)
        if saved != last:
            save_checkpoint(out_dir, last, policy, optimizer)  # a stopped run ends saved
        files.progress(last)

    files.log(last, evaluate(settings, policy))
    final = last_values(files.metrics_path)[0]
    # MLflow gets a bounded wait; what it has not taken yet waits in the run folder's
    # outbox for the scheduler, which delivers it before ending the run.
    files.close()
    files.summary(last, final, stopped=stop)
    return final


def rl_step(settings: EmbeddedSettings, policy: TinyGPT, ref: TinyGPT | None,
            optimizer: torch.optim.Optimizer, step: int,
            held_out: frozenset[str]) -> dict[str, float]:
    """Collect one batch of experience and update the policy on it; the step's metrics."""
    torch.manual_seed(stable_seed("step", settings.seed, step))
    task = TASKS[settings.task]
    t_start = time.perf_counter()
    try:
        exp = collect(settings, task, policy, ref, step, held_out)
    except NothingKept as empty:
        seconds = time.perf_counter() - t_start
        return {"batch/num_gen_batches": empty.attempts, "batch/kept_groups": 0.0,
                "timing_s/step": seconds, "perf/throughput": empty.sampled_tokens / seconds}
    t_gen = time.perf_counter()
    update = ppo_update(settings, policy, optimizer, exp, step)
    t_update = time.perf_counter()
    sharpening = kappa_eff(settings, policy, exp)
    seconds = time.perf_counter() - t_start
    mask = exp.seqs.response_mask
    lengths = exp.seqs.response_lengths
    token_adv = exp.advantages[mask.bool()]
    metrics = {
        **update,
        "actor/entropy": float((exp.entropy * mask).sum() / mask.sum()),
        "critic/score/mean": float(exp.rewards.mean()),
        "critic/score/max": float(exp.rewards.max()),
        "critic/score/min": float(exp.rewards.min()),
        "critic/acc/mean": float(exp.correct.float().mean()),
        "critic/advantages/mean": float(token_adv.mean()),
        "critic/advantages/max": float(token_adv.max()),
        "critic/advantages/min": float(token_adv.min()),
        "response_length/mean": float(lengths.mean()),
        "response_length/clip_ratio": float(
            (lengths >= settings.max_response_length).float().mean()),
        "batch/num_gen_batches": float(exp.attempts),
        "batch/kept_groups": float(exp.groups),
        "timing_s/gen": t_gen - t_start,
        "timing_s/update": t_update - t_gen,
        "timing_s/step": seconds,
        "perf/throughput": exp.sampled_tokens / seconds,
    }
    if sharpening is not None:
        metrics["actor/kappa_eff"] = sharpening
    return metrics


# --- phase 1: experience (sample, score, shape rewards, advantages) --------------------


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
        coins = random_rewards(prompt_ids[:, None], torch.arange(g)[None, :], settings.seed)
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
        keep = (dynamic_sampling_keep(correct.float()) if algo.dynamic_sampling
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
    entropy = entropy_from_logits(logits)
    ref_log_prob = None if ref is None else token_log_probs(
        response_logits(ref, seqs, settings.temperature), seqs.responses)
    # Rewards and advantages are small per-response tensors: kept on the CPU.
    rewards = scale_rewards(correct, settings.reward_correct, settings.reward_incorrect)
    if algo.overlong_penalty and settings.overlong_buffer > 0:
        cache = min(settings.overlong_buffer, settings.max_response_length)
        rewards = rewards + overlong_penalty(
            seqs.response_lengths.cpu().reshape(groups, g), settings.max_response_length, cache,
            settings.overlong_penalty_factor)
    if settings.entropy_intervention == "entropy_reward" and settings.intervention_active(step):
        seq_entropy = masked_mean(entropy, mask, dim=-1).cpu().reshape(groups, g)
        rewards = entropy_reward(rewards, seq_entropy, settings.entropy_coef)
    options = {"std": algo.advantage_std} if algo.advantage == "grpo" else {}
    adv = advantages(algo.advantage, rewards, **options)
    return Experience(
        seqs=seqs, group_index=torch.arange(groups).repeat_interleave(g),
        correct=correct.reshape(-1), rewards=rewards,
        advantages=broadcast_to_tokens(adv.reshape(-1).to(mask.device), mask),
        old_log_prob=old_log_prob, ref_log_prob=ref_log_prob, entropy=entropy,
        attempts=attempts, sampled_tokens=sampled_tokens)


# --- phase 2: the policy update, then the step's κ_eff ------------------------------------


def ppo_update(settings: EmbeddedSettings, policy: TinyGPT, optimizer: torch.optim.Optimizer,
               exp: Experience, step: int) -> dict[str, float]:
    """Optimise on ``exp``; return the mean of each ``actor/*`` metric over mini-batches."""
    algo = settings.algorithm
    g = settings.group_size
    generator = torch.Generator().manual_seed(stable_seed("update", settings.seed, step))
    # Clip-Cov draws its tokens at random: from the step's generator, for reproducibility.
    random_state = {"generator": generator} if algo.loss == "clip_cov" else {}
    entropy_bonus = (settings.entropy_intervention == "entropy_loss"
                     and settings.intervention_active(step))
    scale = (float(settings.max_response_length)
             if algo.loss_agg_mode == "seq-mean-token-sum-norm" else None)
    sums: dict[str, float] = defaultdict(float)
    count = 0
    for _ in range(settings.ppo_epochs):
        order = torch.randperm(exp.groups, generator=generator)
        for chunk in torch.tensor_split(order, settings.ppo_mini_batches):
            if len(chunk) == 0:
                continue
            rows = (chunk[:, None] * g + torch.arange(g)[None, :]).reshape(-1)
            rows = rows.to(exp.seqs.tokens.device)
            sub = exp.seqs.select(rows)
            mask = sub.response_mask
            logits = response_logits(policy, sub, settings.temperature)
            log_prob = token_log_probs(logits, sub.responses)
            old = exp.old_log_prob[rows]
            adv = exp.advantages[rows]
            loss, metrics = policy_loss(
                algo.loss, old, log_prob, adv, mask, agg_mode=algo.loss_agg_mode,
                clip_ratio_low=algo.clip_ratio_low, clip_ratio_high=algo.clip_ratio_high,
                clip_ratio_c=algo.clip_ratio_c, loss_scale_factor=scale,
                **algo.policy_loss_params, **random_state)
            entropy = aggregate(entropy_from_logits(logits), mask, algo.loss_agg_mode, scale)
            metrics["actor/entropy_loss"] = entropy.item()
            if entropy_bonus:
                loss = loss - settings.entropy_coef * entropy
            if algo.use_kl_loss and exp.ref_log_prob is not None:
                kl = aggregate(
                    kl_penalty(log_prob, exp.ref_log_prob[rows], algo.kl_loss_type),
                    mask, algo.loss_agg_mode, scale)
                loss = loss + algo.kl_coef * kl
                metrics["actor/kl_loss"] = kl.item()
                metrics["actor/kl_coef"] = algo.kl_coef
            metrics["actor/clipfrac_upper"], metrics["actor/clipfrac_lower"] = \
                diagnostics.clip_fractions(old, log_prob.detach(), adv, mask,
                                           algo.clip_ratio_low, algo.clip_ratio_high)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.grad_clip)
            optimizer.step()
            metrics["actor/grad_norm"] = float(grad_norm)
            metrics["actor/loss"] = loss.item()
            for key, value in metrics.items():
                sums[key] += float(value)
            count += 1
    return {key: value / max(count, 1) for key, value in sums.items()}


@torch.no_grad()
def kappa_eff(settings: EmbeddedSettings, policy: TinyGPT, exp: Experience) -> float | None:
    """κ_eff of this step's update, sequence log-probs after vs before (docs/algorithms.md)."""
    mask = exp.seqs.response_mask
    new = token_log_probs(response_logits(policy, exp.seqs, settings.temperature),
                          exp.seqs.responses)
    return diagnostics.kappa_eff((new * mask).sum(-1).cpu(),
                                 (exp.old_log_prob * mask).sum(-1).cpu(), exp.correct,
                                 exp.group_index)
