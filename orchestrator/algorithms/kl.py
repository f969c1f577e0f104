"""Per-token KL estimators between the policy and the reference policy
(docs/algorithms.md#kl-estimators): the estimators and clamps of verl 0.9.1's ``kl_penalty``, and
its straight-through variants (a trailing ``+``: the value, with the gradient of k2)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from orchestrator.algorithms.errors import unknown_name

KlFn = Callable[[Tensor, Tensor], Tensor]


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
