"""``python -m orchestrator.backends.verl.compose_worker``: composes verl configs with verl's own
Hydra config (preflight's engine). It runs the plug-in's check first (``kappa_verl.check()``
imports verl: slow); if that fails the handshake is ``{"plugin_error": "..."}`` and it exits.
Else the handshake holds verl's version, the registries and the plug-in's facts, then each
stdin line ``{"overrides": [...], "extra": [...]}`` is answered ``{"problems": [[key,
message], ...]}``. Protocol lines go to the original stdout; whatever verl prints, to stderr."""

from __future__ import annotations

import difflib
import json
import os
import sys
from typing import Any, TextIO

# The estimator kappa's plug-in registers in verl (plugins/README.md; it adds no loss),
# listed here too so that the registries do not depend on how the plug-in was loaded.
PLUGIN_ESTIMATORS = ("reward_budget",)


def registries() -> dict[str, list[str]]:
    """verl's advantage estimators, policy losses and reward managers, plus the plug-in's."""
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY

    return {
        "adv_estimator": sorted({*ADV_ESTIMATOR_REGISTRY, *PLUGIN_ESTIMATORS}),
        "loss_mode": sorted(POLICY_LOSS_REGISTRY),
        "reward_manager": sorted(REWARD_MANAGER),
    }


def _compose(overrides: list[str]) -> Any:
    from hydra import compose
    from omegaconf import OmegaConf

    cfg = compose("ppo_trainer", overrides=overrides)
    OmegaConf.to_container(cfg, resolve=True)  # interpolations an override broke
    return cfg


def _semantic(cfg: Any, known: dict[str, list[str]]) -> list[list[str]]:
    """Names verl only checks after the first rollout, and the actor's strict dataclass."""
    from verl.utils.config import omega_conf_to_dataclass

    problems = []
    checks = {
        "algorithm.adv_estimator": ("adv_estimator", cfg.algorithm.adv_estimator),
        "actor_rollout_ref.actor.policy_loss.loss_mode":
            ("loss_mode", cfg.actor_rollout_ref.actor.policy_loss.loss_mode),
    }
    if cfg.reward.reward_manager.source == "register":
        checks["reward.reward_manager.name"] = ("reward_manager", cfg.reward.reward_manager.name)
    for key, (kind, name) in checks.items():
        if name not in known[kind]:
            close = difflib.get_close_matches(str(name), known[kind], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            listed = ", ".join(known[kind])
            problems.append([key, f"unknown {kind} {name!r}{hint}; known: {listed}"])
    try:
        omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    except Exception as exc:  # verl raises TypeError/ValueError/AssertionError alike
        problems.append(["actor_rollout_ref.actor", f"{type(exc).__name__}: {exc}"])
    return problems


def check(request: dict[str, list[str]], known: dict[str, list[str]]) -> list[list[str]]:
    """Problems of one cell as ``[override or key, message]`` pairs (empty = composes), each
    composition error pinned to the extra override(s) causing it, the others still checked."""
    base, extra = request["overrides"], request.get("extra", [])
    try:
        return _semantic(_compose(base + extra), known)
    except Exception as exc:
        first = exc
    try:
        _compose(base)
    except Exception as base_exc:
        return [["(generated command)", f"{type(base_exc).__name__}: {base_exc}"]]
    problems, good = [], []
    for override in extra:
        try:
            _compose([*base, override])
            good.append(override)
        except Exception as one_exc:
            problems.append([override, f"{type(one_exc).__name__}: {one_exc}"])
    try:
        problems += _semantic(_compose(base + good), known)
    except Exception as rest_exc:  # overrides that only clash together
        problems.append(["extra_overrides", f"{type(rest_exc).__name__}: {rest_exc}"])
    return problems or [["extra_overrides", f"{type(first).__name__}: {first}"]]


def serve(proto: TextIO) -> None:
    """Handshake, then answer requests until stdin closes (at once if the plug-in fails)."""
    import importlib.metadata
    from pathlib import Path

    try:
        import kappa_verl

        facts = kappa_verl.check()
    except Exception as exc:  # PluginError, ImportError, or whatever the plug-in raised
        print(json.dumps({"plugin_error": f"{type(exc).__name__}: {exc}"}), file=proto,
              flush=True)
        return

    import verl
    from hydra import initialize_config_dir

    known = registries()
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    hello = {"verl_version": importlib.metadata.version("verl"), "registries": known,
             "plugin": facts}
    print(json.dumps(hello), file=proto, flush=True)
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        for line in sys.stdin:
            if line.strip():
                print(json.dumps({"problems": check(json.loads(line), known)}), file=proto,
                      flush=True)


def main() -> None:
    """Entry point: keep the protocol on the real stdout, everything else on stderr."""
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(proto)


if __name__ == "__main__":
    main()
