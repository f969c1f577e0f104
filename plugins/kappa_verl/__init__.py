"""kappa's verl plug-in (entry point ``verl.plugins: kappa = kappa_verl``).

Importing this package — which verl does on every ``import verl`` through the entry point,
or through ``VERL_USE_EXTERNAL_MODULES=kappa_verl`` — registers the ``reward_budget``
advantage estimator and installs the entropy-to-reward hook on the V1 trainer. verl
swallows plug-in import errors at DEBUG level, so a failure here is logged at ERROR on
the ``kappa_verl`` logger and re-raised; the verl backend's preflight runs
:func:`check`, which raises :class:`PluginError` with the reason.

The contract (names, Hydra keys, env vars) is in plugins/README.md.
"""

from __future__ import annotations

import importlib.util
import logging
import os

__version__ = "0.1.0"
SUPPORTED_VERL = "0.9.1"
ESTIMATOR_NAME = "reward_budget"

_log = logging.getLogger("kappa_verl")


class PluginError(RuntimeError):
    """The plug-in cannot work in this environment; the message says why and what to do."""


def reward_function_path() -> str:
    """Absolute path of ``kappa_verl/rewards.py`` (for ``reward.custom_reward_function.path``)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "rewards.py")


def _load() -> None:
    from kappa_verl import entropy_reward, estimators
    from orchestrator.executors.job_secrets import load_secret_env

    # A Ray job's secrets (a tracking URI with its password) stay out of its runtime_env,
    # which the dashboard shows; each of verl's Ray workers reads them from the job's file.
    load_secret_env()

    estimators.register()
    entropy_reward.install()


def check() -> dict[str, str]:
    """Verify the plug-in is usable here; facts on success, :class:`PluginError` otherwise.

    Checks: ``orchestrator.algorithms`` importable, verl's version, ``reward_budget`` in
    verl's estimator registry (i.e. the plug-in actually loaded), the reward file exists
    and the entropy-reward env vars parse.
    """
    problems: list[str] = []
    if importlib.util.find_spec("orchestrator") is None:
        problems.append("package 'orchestrator' is not importable: install the kappa root "
                        "with `pip install --no-deps -e <kappa>` in this environment")
    try:
        import verl
        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    except Exception as exc:
        raise PluginError(f"verl is not importable: {exc!r}") from exc
    version = str(getattr(verl, "__version__", "unknown"))
    if version != SUPPORTED_VERL:
        problems.append(f"verl {version} found; kappa_verl is written against verl "
                        f"{SUPPORTED_VERL}")
    if ESTIMATOR_NAME not in ADV_ESTIMATOR_REGISTRY:
        problems.append(f"'{ESTIMATOR_NAME}' is not in verl's ADV_ESTIMATOR_REGISTRY: the "
                        "plug-in did not load (see ERROR lines from logger 'kappa_verl')")
    path = reward_function_path()
    if not os.path.isfile(path):
        problems.append(f"reward file {path} is missing")
    try:
        from kappa_verl.entropy_reward import EntropyRewardSettings

        settings = EntropyRewardSettings.from_env()
    except ValueError as exc:
        problems.append(str(exc))
        settings = None
    if problems:
        raise PluginError("kappa_verl is not usable: " + "; ".join(problems))
    return {
        "kappa_verl_version": __version__,
        "verl_version": version,
        "estimator": ESTIMATOR_NAME,
        "reward_function_path": path,
        "entropy_reward": f"coef={settings.coef} steps={settings.steps}" if settings else "",
    }


try:
    _load()
except Exception:
    _log.error("kappa_verl failed to load; verl would hide this at DEBUG level", exc_info=True)
    raise
