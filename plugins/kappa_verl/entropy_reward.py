"""Entropy-to-reward: ``R(o) + c · H(π(o))`` for the first N steps
(docs/algorithms.md#entropy-interventions).

Where it attaches in verl 0.9.1 (V1 trainer, ``trainer.use_v1=true``, the default):
``PPOTrainer._compute_old_log_prob`` writes the per-token ``entropy`` of every response to
TransferQueue; ``PPOTrainer._compute_advantage`` then reads ``rm_scores`` (the reward on
the last valid token) but not the entropy. We wrap ``_compute_advantage`` so that, before
it runs, it adds ``c · masked-mean entropy`` to the last valid token of each response's
``rm_scores`` in TransferQueue. Everything downstream (in-reward KL, the estimator,
``critic/score/*``) then sees the shaped reward; validation never passes through
``_compute_advantage``, so ``val-core`` accuracy is untouched, and ``acc`` in
``reward_extra_info`` stays the true correctness.

The wrapper is installed on ``verl.trainer.ppo.v1.trainer_base`` when that module is
imported — only the trainer process (verl's ``TaskRunner`` actor) ever imports it —
by a post-import hook on ``sys.meta_path``; nothing is patched in the actor workers.
It is switched on by env vars read at each step: ``KAPPA_ENTROPY_REWARD_COEF`` (c) and
``KAPPA_ENTROPY_REWARD_STEPS`` (N; unset or 0 = every step).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
from torch import Tensor

from orchestrator.algorithms.masking import masked_mean
from orchestrator.algorithms.rewards import entropy_reward

COEF_ENV = "KAPPA_ENTROPY_REWARD_COEF"
STEPS_ENV = "KAPPA_ENTROPY_REWARD_STEPS"
TRAINER_MODULE = "verl.trainer.ppo.v1.trainer_base"
_MARK = "_kappa_entropy_reward"


@dataclass(frozen=True)
class EntropyRewardSettings:
    """The intervention's two numbers; ``coef == 0`` means off."""

    coef: float = 0.0
    steps: int = 0

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> EntropyRewardSettings:
        """Read ``KAPPA_ENTROPY_REWARD_COEF`` / ``_STEPS``; a malformed value raises ValueError."""
        env = os.environ if environ is None else environ
        coef_text = env.get(COEF_ENV, "").strip()
        steps_text = env.get(STEPS_ENV, "").strip()
        try:
            coef = float(coef_text) if coef_text else 0.0
            steps = int(steps_text) if steps_text else 0
        except ValueError as exc:
            raise ValueError(
                f"{COEF_ENV}={coef_text!r} / {STEPS_ENV}={steps_text!r}: expected a float and "
                f"an integer ({exc})"
            ) from exc
        if steps < 0:
            raise ValueError(f"{STEPS_ENV} must be >= 0 (0 = every step); got {steps}")
        return cls(coef=coef, steps=steps)

    def active(self, global_step: int) -> bool:
        """Whether the bonus applies at verl's ``global_steps`` (1-based)."""
        return self.coef != 0.0 and (self.steps == 0 or global_step <= self.steps)


def add_entropy_to_scores(rm_scores: Tensor, entropy: Tensor, response_mask: Tensor,
                          coef: float) -> tuple[Tensor, Tensor]:
    """Token scores with ``coef · H(o)`` added on each response's last valid token.

    All tensors are padded ``(B, T)``. ``H(o)`` is the masked mean of the per-token entropy
    (:func:`orchestrator.algorithms.masking.masked_mean`); the shaped reward on the last valid
    token is :func:`orchestrator.algorithms.rewards.entropy_reward` of the score there (which
    detaches ``H``), so a response's summed score becomes ``R(o) + coef · H(o)``. A
    response with no valid token is left unchanged. Returns the new scores and the
    per-response bonus ``(B,)`` (0 for empty responses).
    """
    mask = response_mask.to(rm_scores.dtype)
    seq_entropy = masked_mean(entropy.to(rm_scores.dtype), mask, dim=-1)
    has_tokens = mask.sum(dim=-1) > 0
    rows = torch.nonzero(has_tokens).squeeze(-1)
    positions = torch.arange(mask.shape[-1], device=mask.device).expand_as(mask)
    last = torch.where(mask > 0, positions, torch.full_like(positions, -1)).max(dim=-1).values
    shaped = rm_scores.clone()
    shaped[rows, last[rows]] = entropy_reward(rm_scores[rows, last[rows]], seq_entropy[rows],
                                              coef)
    bonus = torch.zeros_like(seq_entropy)
    bonus[rows] = entropy_reward(torch.zeros_like(seq_entropy[rows]), seq_entropy[rows], coef)
    return shaped, bonus


def shape_rewards_in_store(tq: Any, keys: Sequence[Any], partition_id: str, coef: float,
                           metrics: dict[str, Any]) -> None:
    """Rewrite ``rm_scores`` in TransferQueue for ``keys`` with the entropy bonus added.

    Uses the same access pattern as verl's own trainer (``kv_batch_get`` of jagged
    per-response tensors, padded for the arithmetic, written back jagged).
    """
    from tensordict import TensorDict
    from verl.workers.utils.padding import response_to_nested

    data = tq.kv_batch_get(keys=keys, partition_id=partition_id,
                           select_fields=["rm_scores", "entropy", "response_mask"])
    nested_mask = data["response_mask"]
    padded = data.to_padded_tensor()
    shaped, bonus = add_entropy_to_scores(padded["rm_scores"], padded["entropy"],
                                          padded["response_mask"], coef)
    out = TensorDict({"rm_scores": response_to_nested(shaped, nested_mask)},
                     batch_size=len(keys))
    tq.kv_batch_put(keys=keys, partition_id=partition_id, fields=out)
    metrics["kappa/entropy_reward/mean"] = float(bonus.mean().item()) if len(bonus) else 0.0


def patch_trainer(module: ModuleType) -> bool:
    """Wrap ``module.PPOTrainer._compute_advantage``; False if it was already wrapped."""
    trainer_cls = module.PPOTrainer
    original: Callable[..., Any] = trainer_cls._compute_advantage
    if getattr(original, _MARK, False):
        return False

    @functools.wraps(original)
    def _compute_advantage(self: Any, batch: Any, metrics: dict[str, Any]) -> Any:
        settings = EntropyRewardSettings.from_env()
        active = settings.active(int(self.global_steps))
        if active:
            shape_rewards_in_store(module.tq, batch.keys, batch.partition_id, settings.coef,
                                   metrics)
        if settings.coef != 0.0:
            metrics["kappa/entropy_reward/active"] = float(active)
        return original(self, batch, metrics)

    setattr(_compute_advantage, _MARK, True)
    trainer_cls._compute_advantage = _compute_advantage
    return True


class _RunAfterExec(importlib.abc.Loader):
    """A loader that executes the real loader, then calls ``after(module)``."""

    def __init__(self, inner: importlib.abc.Loader, after: Callable[[ModuleType], object]) -> None:
        self._inner = inner
        self._after = after

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        self._after(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for tracebacks
        return getattr(self._inner, name)


class PostImportHook(importlib.abc.MetaPathFinder):
    """Calls ``after(module)`` right after the module ``target`` is first imported."""

    def __init__(self, target: str, after: Callable[[ModuleType], object]) -> None:
        self.target = target
        self.after = after

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.target:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _RunAfterExec(spec.loader, self.after)
                return spec
        return None


def install(target: str = TRAINER_MODULE,
            patch: Callable[[ModuleType], object] = patch_trainer) -> None:
    """Arrange for ``patch(module)`` on ``target``: now if imported, else on first import."""
    loaded = sys.modules.get(target)
    if loaded is not None:
        patch(loaded)
        return
    if not any(isinstance(f, PostImportHook) and f.target == target for f in sys.meta_path):
        sys.meta_path.insert(0, PostImportHook(target, patch))
