"""The smallest real embedded spec (a 16-wide, one-layer model, a few steps): the YAML that
the integration tests of whole sweeps submit, with their own name, settings and axes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

BASE: dict[str, object] = {
    "task": "arithmetic", "group_size": 4, "prompts_per_step": 4, "ppo_mini_batches": 1,
    "max_steps": 3, "val_every": 1, "val_size": 16, "eval_samples": 2,
    "model": {"d_model": 16, "n_layers": 1, "n_heads": 2},
    "warm_start": {"steps": 5, "batch_size": 8},
}


def tiny_embedded(name: str, axes: Mapping[str, object], **base: object) -> str:
    """A spec named ``name`` over ``axes`` (each a list of values or a mapping of
    variants), with ``base`` settings over :data:`BASE` (``None`` drops one)."""
    settings = {k: v for k, v in {**BASE, **base}.items() if v is not None}
    lines = [f"name: {name}", "backend: embedded", "base:"]
    lines += [f"  {k}: {json.dumps(v)}" for k, v in settings.items()]
    lines += ["axes:"] + [f"  {k}: {json.dumps(v)}" for k, v in axes.items()]
    return "\n".join(lines) + "\n"


def finished_tiny_sweep(root: Path, name: str) -> Path:
    """Submit and wait for a two-cell tiny sweep (``reward_budget`` off and on, two steps)
    with ``root/spec.yaml`` and ``KAPPA_HOME`` ``root/home``; ``root``."""
    import pytest

    from kit.home import use_home
    from orchestrator.sweeps.driver import submit

    with pytest.MonkeyPatch.context() as mp:
        use_home(root / "home", mp)
        spec = root / "spec.yaml"
        spec.write_text(tiny_embedded(name, {"reward_budget": [False, True]}, max_steps=2))
        submit(spec, wait=True, max_parallel=2)
    return root
