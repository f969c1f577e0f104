"""A verl cell's canary: two training steps at the smallest batch, validation off, no
final evaluation; what it catches that preflight cannot, and what it cannot:
docs/verl.md#canaries."""

from __future__ import annotations

from typing import Any

from orchestrator.backends.rl_settings import CANARY_STEPS, canary_intervention_steps
from orchestrator.backends.verl.settings import VerlSettings

# Appended to a canary's extra_overrides (they come last, and the last value wins).
NO_VALIDATION = ("trainer.test_freq=-1", "trainer.val_before_train=False")


def smallest_batch(s: VerlSettings) -> tuple[int, int]:
    """``(prompts_per_step, ppo_mini_batch_size)`` of the smallest batch like ``s``'s. The
    mini-batch is the smallest divisor of the cell's for which verl can split the
    mini-batch's ``× group_size`` responses evenly over every GPU (the rule the settings
    check) and, if the cell's split gives each GPU whole micro-batches, so does the canary's
    (verl asserts it at start-up). A step keeps the cell's number of mini-batches."""
    mini = s.ppo_mini_batch_size or s.prompts_per_step

    def whole_micro_batches(m: int) -> bool:
        return (m * s.group_size // s.gpus) % s.ppo_micro_batch_size_per_gpu == 0

    keeps_micro = whole_micro_batches(mini)
    smallest = next(d for d in range(1, mini + 1)
                    if mini % d == 0 and (d * s.group_size) % s.gpus == 0
                    and (whole_micro_batches(d) or not keeps_micro))
    return smallest * (s.prompts_per_step // mini), smallest


def canary_settings(settings: VerlSettings, raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` (the cell's settings as given) turned into its canary (module docstring)."""
    steps = min(CANARY_STEPS, settings.max_steps)
    prompts, mini = smallest_batch(settings)
    smaller: dict[str, Any] = {
        "max_steps": steps,
        "checkpoint_every": steps,
        "intervention_steps": canary_intervention_steps(
            settings.intervention_steps, settings.max_steps, steps),
        "prompts_per_step": prompts,
        "ppo_mini_batch_size": mini if settings.ppo_mini_batch_size is not None else None,
        "eval_files": [],
    }
    # Lists, not tuples: the result is written as YAML and JSON.
    changed = {k: v for k, v in smaller.items()
               if getattr(settings, k) != (tuple(v) if isinstance(v, list) else v)}
    extra = tuple(o for o in settings.extra_overrides if o not in NO_VALIDATION)
    return {**raw, **changed, "extra_overrides": [*extra, *NO_VALIDATION]}
