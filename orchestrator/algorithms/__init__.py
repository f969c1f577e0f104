"""kappa's RL algorithms in pure torch: the one implementation every backend uses.

Advantage constructions, policy losses, aggregation, KL estimators, reward transforms,
DAPO helpers and diagnostics, as defined in ALGORITHMS.md §1–§6 and matching the
semantics of verl 0.9.1's ``core_algos``. Importing this package pulls in torch only
(no mlflow, ray, sqlalchemy or verl).
"""

from orchestrator.algorithms.advantages import (
    ADVANTAGES,
    advantages,
    drgrpo,
    grpo,
    reward_budget,
    reward_budget_shares,
)
from orchestrator.algorithms.covariance_losses import clip_cov_selection, kl_cov_selection
from orchestrator.algorithms.dapo import dynamic_sampling_keep, overlong_penalty
from orchestrator.algorithms.diagnostics import (
    ClipFractions,
    approx_kl,
    clip_fractions,
    kappa_eff,
    skewness_phi,
)
from orchestrator.algorithms.entropy import entropy_from_logits, sequence_entropy, token_entropy
from orchestrator.algorithms.kl import KL_PENALTIES, kl_penalty
from orchestrator.algorithms.masking import (
    AGG_MODES,
    aggregate,
    broadcast_to_tokens,
    masked_mean,
    masked_sum,
)
from orchestrator.algorithms.policy_losses import POLICY_LOSSES, loss_options, policy_loss
from orchestrator.algorithms.rewards import entropy_reward, random_rewards, scale_rewards
from orchestrator.algorithms.sharpness import (
    AdvantageRow,
    PairAdvantages,
    advantage_table,
    sharpness_kappa,
)
from orchestrator.algorithms.table_render import TABLE_FORMATS, render_advantage_table

__all__ = [
    "ADVANTAGES",
    "AGG_MODES",
    "KL_PENALTIES",
    "POLICY_LOSSES",
    "TABLE_FORMATS",
    "AdvantageRow",
    "ClipFractions",
    "PairAdvantages",
    "advantage_table",
    "advantages",
    "aggregate",
    "approx_kl",
    "broadcast_to_tokens",
    "clip_cov_selection",
    "clip_fractions",
    "drgrpo",
    "dynamic_sampling_keep",
    "entropy_from_logits",
    "entropy_reward",
    "grpo",
    "kappa_eff",
    "kl_cov_selection",
    "kl_penalty",
    "loss_options",
    "masked_mean",
    "masked_sum",
    "overlong_penalty",
    "policy_loss",
    "random_rewards",
    "render_advantage_table",
    "reward_budget",
    "reward_budget_shares",
    "scale_rewards",
    "sequence_entropy",
    "sharpness_kappa",
    "skewness_phi",
    "token_entropy",
]
