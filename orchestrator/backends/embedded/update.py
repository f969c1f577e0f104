"""The policy update of one RL step: PPO-style mini-batch optimisation of the chosen loss.

The batch's groups are shuffled and split into ``ppo_mini_batches`` mini-batches per
epoch; each mini-batch is one optimizer step, so after the first one the ratios move off 1
and clipping starts to matter. The loss is the baseline's policy loss, plus ``β·KL`` to the
frozen reference when the bundle uses a KL loss, minus ``c·H`` while the entropy-loss
intervention is active.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from orchestrator import algorithms as alg
from orchestrator.backends.embedded.experience import Experience
from orchestrator.backends.embedded.model import TinyGPT
from orchestrator.backends.embedded.rollout import response_logits, token_log_probs
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.tasks import stable_seed

# Recipe values of the covariance losses (VERL_NOTES §1; ALGORITHMS.md §2).
_CLIP_COV = {"clip_cov_ratio": 2e-4, "clip_cov_lb": 1.0, "clip_cov_ub": 5.0}
_KL_COV = {"kl_cov_ratio": 2e-3, "ppo_kl_coef": 1.0}


def _loss_options(loss: str, generator: torch.Generator) -> dict[str, object]:
    if loss == "clip_cov":
        return {**_CLIP_COV, "generator": generator}
    if loss == "kl_cov":
        return dict(_KL_COV)
    return {}


def ppo_update(settings: EmbeddedSettings, policy: TinyGPT, optimizer: torch.optim.Optimizer,
               exp: Experience, step: int) -> dict[str, float]:
    """Optimise on ``exp``; return the mean of each ``actor/*`` metric over mini-batches."""
    algo = settings.algorithm
    g = settings.group_size
    generator = torch.Generator().manual_seed(stable_seed("update", settings.seed, step))
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
            loss, metrics = alg.policy_loss(
                algo.loss, old, log_prob, adv, mask, agg_mode=algo.loss_agg_mode,
                clip_ratio_low=algo.clip_ratio_low, clip_ratio_high=algo.clip_ratio_high,
                clip_ratio_c=algo.clip_ratio_c, loss_scale_factor=scale,
                **_loss_options(algo.loss, generator))
            entropy = alg.aggregate(alg.entropy_from_logits(logits), mask, algo.loss_agg_mode,
                                    scale)
            metrics["actor/entropy_loss"] = entropy.item()
            if entropy_bonus:
                loss = loss - settings.entropy_coef * entropy
            if algo.use_kl_loss and exp.ref_log_prob is not None:
                kl = alg.aggregate(
                    alg.kl_penalty(log_prob, exp.ref_log_prob[rows], algo.kl_loss_type),
                    mask, algo.loss_agg_mode, scale)
                loss = loss + algo.kl_coef * kl
                metrics["actor/kl_loss"] = kl.item()
                metrics["actor/kl_coef"] = algo.kl_coef
            fractions = alg.clip_fractions(old, log_prob.detach(), adv, mask,
                                           algo.clip_ratio_low, algo.clip_ratio_high)
            metrics["actor/clipfrac_upper"] = fractions.upper
            metrics["actor/clipfrac_lower"] = fractions.lower
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
    """κ_eff of this step's update (ALGORITHMS.md §6): sequence log-probs after vs before."""
    mask = exp.seqs.response_mask
    new = token_log_probs(response_logits(policy, exp.seqs, settings.temperature),
                          exp.seqs.responses)
    return alg.kappa_eff((new * mask).sum(-1).cpu(), (exp.old_log_prob * mask).sum(-1).cpu(),
                         exp.correct, exp.group_index)
