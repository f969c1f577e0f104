"""Covariance-based entropy-preserving losses, Clip-Cov and KL-Cov
(docs/algorithms.md#policy-losses): both treat the few valid tokens of a batch with the
largest centred covariance ``c_t`` differently. Semantics follow verl 0.9.1's
``compute_policy_loss_clip_cov`` and ``compute_policy_loss_kl_cov``, metrics included."""

from __future__ import annotations

import torch
from torch import Tensor

from orchestrator.algorithms.bundles import BUNDLES
from orchestrator.algorithms.masking import aggregate, masked_mean

# The recipes' parameters are the defaults (the table of bundles holds them).
_CLIP_COV = BUNDLES["clip_cov"].policy_loss_params
_KL_COV = BUNDLES["kl_cov"].policy_loss_params


def clip_cov_selection(log_prob: Tensor, advantages: Tensor, response_mask: Tensor,
                       already_clipped: Tensor, *, clip_cov_ratio: float, clip_cov_lb: float,
                       clip_cov_ub: float, generator: torch.Generator | None = None) -> Tensor:
    """Boolean ``(B, T)``: the tokens whose gradient Clip-Cov stops. Candidates are valid tokens not
    already clipped by the ratio clip with ``clip_cov_lb < c_t < clip_cov_ub``;
    ``max(1, int(ratio · #valid tokens))`` of them are drawn uniformly at random (``generator``
    makes the draw reproducible)."""
    valid = response_mask.bool()
    adv_centred = advantages - masked_mean(advantages, response_mask)
    logp_centred = log_prob.detach() - masked_mean(log_prob.detach(), response_mask)
    cov = (adv_centred * logp_centred).detach()
    candidates = valid & ~already_clipped & (cov > clip_cov_lb) & (cov < clip_cov_ub)
    positions = torch.nonzero(candidates)
    budget = max(int(clip_cov_ratio * int(valid.sum().item())), 1)
    chosen = positions[torch.randperm(len(positions), generator=generator)[:budget]]
    selected = torch.zeros_like(valid)
    selected[chosen[:, 0], chosen[:, 1]] = True
    return selected


def clip_cov(old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor,
             *, agg_mode: str, clip_ratio_low: float, clip_ratio_high: float,
             clip_ratio_c: float = 3.0, loss_scale_factor: float | None = None,
             clip_cov_ratio: float = _CLIP_COV["clip_cov_ratio"],
             clip_cov_lb: float = _CLIP_COV["clip_cov_lb"],
             clip_cov_ub: float = _CLIP_COV["clip_cov_ub"],
             generator: torch.Generator | None = None) -> tuple[Tensor, dict[str, float]]:
    """Clip-Cov: the PPO clip surrogate with the selected tokens' loss (and gradient) zeroed. No
    dual clip and no log-ratio clamp, as in verl. Metrics: ``actor/pg_clipfrac`` is the share of
    valid tokens selected by the covariance rule (verl's definition); ``actor/ppo_kl``;
    ``actor/pg_loss``."""
    del clip_ratio_c  # verl's Clip-Cov has no dual clip.
    if not clip_cov_ratio > 0:
        raise ValueError(f"clip_cov_ratio must be > 0; got {clip_cov_ratio}")
    log_ratio = log_prob - old_log_prob
    ratio = torch.exp(log_ratio)
    ppo_kl = masked_mean(-log_ratio, response_mask)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    clipped_by_ratio = (clipped > unclipped) & response_mask.bool()
    selected = clip_cov_selection(
        log_prob, advantages, response_mask, clipped_by_ratio, clip_cov_ratio=clip_cov_ratio,
        clip_cov_lb=clip_cov_lb, clip_cov_ub=clip_cov_ub, generator=generator)
    keep = (~selected).to(ratio.dtype)
    losses = torch.maximum(unclipped, clipped) * keep
    loss = aggregate(losses, response_mask, agg_mode, loss_scale_factor)
    clipfrac = masked_mean(selected.float(), response_mask)
    return loss, {"actor/pg_loss": loss.item(), "actor/pg_clipfrac": clipfrac.item(),
                  "actor/ppo_kl": ppo_kl.item()}


def kl_cov_selection(log_prob: Tensor, advantages: Tensor, response_mask: Tensor, *,
                     kl_cov_ratio: float) -> Tensor:
    """Boolean ``(B, T)``: the top ``max(1, int(ratio · #valid))`` valid tokens by ``c_t``."""
    valid = response_mask.bool()
    flat_valid = torch.nonzero(valid.reshape(-1), as_tuple=True)[0]
    selected = torch.zeros(valid.numel(), dtype=torch.bool, device=valid.device)
    if len(flat_valid) > 0:
        adv = advantages.detach().reshape(-1)[flat_valid]
        logp = log_prob.detach().reshape(-1)[flat_valid]
        cov = (adv - adv.mean()) * (logp - logp.mean())
        # At most every valid token (a ratio above 1 would ask topk for more than exist).
        count = min(len(cov), max(1, int(len(cov) * kl_cov_ratio)))
        selected[flat_valid[torch.topk(cov, count, largest=True).indices]] = True
    return selected.reshape(valid.shape)


def kl_cov(old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor, *,
           agg_mode: str, clip_ratio_low: float, clip_ratio_high: float,
           clip_ratio_c: float = 3.0, loss_scale_factor: float | None = None,
           kl_cov_ratio: float = _KL_COV["kl_cov_ratio"],
           ppo_kl_coef: float = _KL_COV["ppo_kl_coef"]) -> tuple[Tensor, dict[str, float]]:
    """KL-Cov: unclipped ``−ρA`` everywhere, plus ``ppo_kl_coef · |log π_θ − log π_old|`` on
    the top ``kl_cov_ratio`` of tokens by covariance. No clipping (verl ignores the clip
    ratios here; they are accepted for a uniform dispatch). Defaults are the paper recipe's
    (2e-3, 1); verl's yaml defaults are 2e-4 and 0.1. Metrics: ``actor/ppo_kl`` is the
    masked mean of ``|log-ratio|`` (verl's definition), and ``actor/pg_loss``."""
    del clip_ratio_low, clip_ratio_high, clip_ratio_c
    if not kl_cov_ratio > 0:
        raise ValueError(f"kl_cov_ratio must be > 0; got {kl_cov_ratio}")
    log_ratio = log_prob - old_log_prob
    abs_kl = log_ratio.abs()
    ratio = torch.exp(log_ratio)
    surrogate = -advantages * ratio
    selected = kl_cov_selection(log_prob, advantages, response_mask, kl_cov_ratio=kl_cov_ratio)
    losses = torch.where(selected, surrogate + ppo_kl_coef * abs_kl, surrogate)
    loss = aggregate(losses, response_mask, agg_mode, loss_scale_factor)
    return loss, {"actor/pg_loss": loss.item(),
                  "actor/ppo_kl": masked_mean(abs_kl, response_mask).item()}
