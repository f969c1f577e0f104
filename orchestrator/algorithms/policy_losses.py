"""The actor's token-level losses (docs/algorithms.md#policy-losses) and the KL penalty to the
reference policy (docs/algorithms.md#kl-estimators), each following the function of the same name in
verl 0.9.1's ``core_algos.py`` (masking, clamps, dual clip, metrics, aggregation), so both backends
optimise the same objective."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import torch
from torch import Tensor

from orchestrator.algorithms.bundles import BUNDLES
from orchestrator.algorithms.errors import AlgorithmError, Issue, unknown_name, unknown_options
from orchestrator.algorithms.masking import aggregate, masked_mean, masked_sum

PolicyLossFn = Callable[..., tuple[Tensor, dict[str, float]]]
KlFn = Callable[[Tensor, Tensor], Tensor]

# verl clamps log-ratios for numerical stability; the same bounds keep parity.
LOG_RATIO_CLAMP = 20.0
GSPO_LOG_RATIO_MAX = 10.0
# The Clip-Cov and KL-Cov recipes' parameters are their defaults (the table of bundles holds them).
_CLIP_COV = BUNDLES["clip_cov"].policy_loss_params
_KL_COV = BUNDLES["kl_cov"].policy_loss_params


def vanilla(old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor, *,
            agg_mode: str, clip_ratio_low: float, clip_ratio_high: float, clip_ratio_c: float = 3.0,
            loss_scale_factor: float | None = None) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped surrogate with separate low/high ratios and, for ``A < 0``, the dual clip
    ``−cA``. ``ε = inf`` on both sides means no clipping at all, dual clip included **(choice; verl
    reaches it with all three ratios 1e9)**; ``clip_ratio_c = inf`` lifts only the dual clip.
    Metrics: ``actor/pg_loss``, ``actor/pg_clipfrac`` (the ratio clip binds),
    ``actor/pg_clipfrac_lower`` (the dual clip binds), ``actor/ppo_kl`` (masked mean of ``log π_old
    − log π_θ``)."""
    no_clip = math.isinf(clip_ratio_low) and math.isinf(clip_ratio_high)
    dual_c = math.inf if no_clip else clip_ratio_c
    log_ratio = torch.clamp(log_prob - old_log_prob, min=-LOG_RATIO_CLAMP, max=LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    ppo_kl = masked_mean(-log_ratio, response_mask)

    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    ppo_losses = torch.maximum(unclipped, clipped)
    clipfrac = masked_mean(torch.gt(clipped, unclipped).float(), response_mask)

    if math.isinf(dual_c):
        losses = ppo_losses
        clipfrac_lower = torch.zeros((), dtype=ratio.dtype)
    else:
        dual = -advantages * dual_c
        negative = advantages < 0
        losses = torch.where(negative, torch.minimum(dual, ppo_losses), ppo_losses)
        clipfrac_lower = masked_mean((torch.gt(ppo_losses, dual) & negative).float(),
                                     response_mask)

    loss = aggregate(losses, response_mask, agg_mode, loss_scale_factor)
    return loss, {"actor/pg_loss": loss.item(), "actor/pg_clipfrac": clipfrac.item(),
                  "actor/pg_clipfrac_lower": clipfrac_lower.item(),
                  "actor/ppo_kl": ppo_kl.item()}


def gspo(old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor, *,
         agg_mode: str, clip_ratio_low: float, clip_ratio_high: float, clip_ratio_c: float = 3.0,
         loss_scale_factor: float | None = None) -> tuple[Tensor, dict[str, float]]:
    """GSPO: every token of a response takes the sequence-level ratio ``s_i = exp(mean_t(log π_θ −
    log π_old))`` as value and the gradient of ``log π_θ(o_t)`` scaled by it, clipped to ``[1−ε_low,
    1+ε_high]``, its log clamped at 10; no dual clip (``clip_ratio_c`` is ignored, as in verl). The
    paper's GSPO is ``agg_mode="seq-mean-token-mean"``; ``actor/pg_clipfrac_lower`` is always 0."""
    del clip_ratio_c  # GSPO has no dual clip; kept in the signature for a uniform dispatch.
    log_ratio = log_prob - old_log_prob
    mask = response_mask.to(log_prob.dtype)
    seq_len = mask.sum(dim=-1).clamp(min=1)
    # masked_sum, not (log_ratio * mask).sum(): a non-finite log-prob on a padded position
    # (0 · inf = NaN) must not spoil the whole response's ratio.
    seq_log_ratio = masked_sum(log_ratio, mask, dim=-1) / seq_len
    token_log_ratio = log_prob - log_prob.detach() + seq_log_ratio.detach().unsqueeze(-1)
    ratio = torch.exp(torch.clamp(token_log_ratio, max=GSPO_LOG_RATIO_MAX))

    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    losses = torch.maximum(unclipped, clipped)
    loss = aggregate(losses, response_mask, agg_mode, loss_scale_factor)
    clipfrac = masked_mean(torch.gt(clipped, unclipped).float(), response_mask)
    ppo_kl = masked_mean(-log_ratio, response_mask)
    return loss, {"actor/pg_loss": loss.item(), "actor/pg_clipfrac": clipfrac.item(),
                  "actor/pg_clipfrac_lower": 0.0, "actor/ppo_kl": ppo_kl.item()}


def clip_cov_selection(log_prob: Tensor, advantages: Tensor, response_mask: Tensor,
                       already_clipped: Tensor, *, clip_cov_ratio: float, clip_cov_lb: float,
                       clip_cov_ub: float, generator: torch.Generator | None = None) -> Tensor:
    """Boolean ``(B, T)``: the tokens whose gradient Clip-Cov stops: ``max(1, int(ratio · #valid))``
    drawn uniformly (reproducibly with ``generator``) from the valid tokens the ratio clip left,
    with ``clip_cov_lb < c_t < clip_cov_ub``."""
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
    """Clip-Cov: the PPO clip surrogate with the selected tokens' loss and gradient zeroed; no dual
    clip, no log-ratio clamp (as in verl). ``actor/pg_clipfrac`` is the share of valid tokens
    selected (verl's definition)."""
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
    """KL-Cov: unclipped ``−ρA``, plus ``ppo_kl_coef · |log π_θ − log π_old|`` on the top
    ``kl_cov_ratio`` of tokens by covariance (clip ratios accepted and ignored, as verl does).
    Defaults are the paper recipe's (2e-3, 1; verl's yaml: 2e-4, 0.1); ``actor/ppo_kl`` is the
    masked mean of ``|log-ratio|`` (verl's)."""
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


POLICY_LOSSES: dict[str, PolicyLossFn] = {
    "vanilla": vanilla, "gspo": gspo, "clip_cov": clip_cov, "kl_cov": kl_cov}

_COMMON = ("old_log_prob", "log_prob", "advantages", "response_mask", "agg_mode",
           "clip_ratio_low", "clip_ratio_high", "clip_ratio_c", "loss_scale_factor")


def loss_options(name: str) -> tuple[str, ...]:
    """The loss-specific keyword options of the policy loss ``name`` (e.g. ``clip_cov_ratio``)."""
    if (fn := POLICY_LOSSES.get(name)) is None:
        raise unknown_name("policy loss", name, POLICY_LOSSES, "loss")
    return tuple(p for p in inspect.signature(fn).parameters if p not in _COMMON)


def _validate(name: str, clip_ratio_low: float, clip_ratio_high: float, clip_ratio_c: float,
              options: dict[str, object]) -> None:
    # loss_options raises first for an unknown name.
    problems = unknown_options("loss", f"policy loss '{name}'", options, loss_options(name))
    for field, value in (("clip_ratio_low", clip_ratio_low), ("clip_ratio_high", clip_ratio_high)):
        if not value > 0:
            problems.append(Issue(f"loss.{field}", "must be > 0 (inf = no clipping)",
                                  found=repr(value)))
    if not clip_ratio_c > 1.0:
        problems.append(Issue("loss.clip_ratio_c", "dual-clip bound must be > 1 (as in verl)",
                              found=repr(clip_ratio_c), fix="use 3.0 (verl's default)"))
    if problems:
        raise AlgorithmError(f"invalid settings for policy loss '{name}'", problems)


def policy_loss(name: str, old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor,
                response_mask: Tensor, *, agg_mode: str, clip_ratio_low: float,
                clip_ratio_high: float, clip_ratio_c: float = 3.0,
                loss_scale_factor: float | None = None,
                **loss_options: object) -> tuple[Tensor, dict[str, float]]:
    """The scalar policy loss ``name`` and its metrics (verl keys, floats). Tensors are ``(B, T)``,
    ``advantages`` may be ``(B,)``; ``loss_scale_factor`` normalises ``seq-mean-token-sum-norm``
    (default: T); loss-specific options: :func:`loss_options`."""
    _validate(name, clip_ratio_low, clip_ratio_high, clip_ratio_c, loss_options)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1).expand_as(log_prob)
    if not old_log_prob.shape == log_prob.shape == advantages.shape == response_mask.shape:
        raise ValueError("policy_loss needs old_log_prob, log_prob, advantages and "
                         f"response_mask of one shape (B, T); got {tuple(old_log_prob.shape)}, "
                         f"{tuple(log_prob.shape)}, {tuple(advantages.shape)}, "
                         f"{tuple(response_mask.shape)}")
    return POLICY_LOSSES[name](
        old_log_prob, log_prob, advantages, response_mask, agg_mode=agg_mode,
        clip_ratio_low=clip_ratio_low, clip_ratio_high=clip_ratio_high,
        clip_ratio_c=clip_ratio_c, loss_scale_factor=loss_scale_factor, **loss_options)


def _k1(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    return log_prob - ref_log_prob


def _abs(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    return (log_prob - ref_log_prob).abs()


def _k2(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    return 0.5 * (log_prob - ref_log_prob).square()


def _k3(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    # Clamps as in verl: the log-ratio for exp() overflow, the result against outliers.
    log_ratio = torch.clamp(ref_log_prob - log_prob, min=-20, max=20)
    return torch.clamp(torch.exp(log_ratio) - log_ratio - 1, min=-10, max=10)


KL_PENALTIES: dict[str, KlFn] = {
    "k1": _k1, "kl": _k1, "abs": _abs, "k2": _k2, "mse": _k2, "k3": _k3, "low_var_kl": _k3}


def kl_penalty(log_prob: Tensor, ref_log_prob: Tensor, kind: str = "k1") -> Tensor:
    """Per-token KL estimate ``(B, T)``; ``kind``: a key of :data:`KL_PENALTIES`, or ``k3+`` etc.
    ``low_var_kl`` (= k3) is the estimator the GRPO bundle puts in its loss."""
    straight_through = kind.endswith("+")
    base = kind[:-1] if straight_through else kind
    if (fn := KL_PENALTIES.get(base)) is None:
        known = list(KL_PENALTIES) + [f"{k}+" for k in ("k1", "k3", "low_var_kl", "kl", "abs")]
        raise unknown_name("KL penalty", kind, known, "kl_loss_type")
    value = fn(log_prob, ref_log_prob)
    if not straight_through or base in ("k2", "mse"):
        return value
    surrogate = _k2(log_prob, ref_log_prob)
    return surrogate - surrogate.detach() + value.detach()
