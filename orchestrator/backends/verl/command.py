"""A verl cell as the argv of ``python3 -m verl.trainer.main_ppo`` (docs/verl.md#recipes), one
per phase: consecutive launches resuming from one checkpoint folder, each complete when verl's
checkpoint tracker reached its end (docs/verl.md#launch-and-phases). :func:`verl_command` is
pure (``tests/golden/verl/`` pins it); rewards go through ``reward.*`` only (verl 0.9.x
silently ignores the legacy top-level keys)."""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.backends.verl.settings import VerlSettings

ENTRY_MODULE = "verl.trainer.main_ppo"
PLUGIN_MODULE = "kappa_verl"
ENV_PREFIX = "+ray_kwargs.ray_init.runtime_env.env_vars."
ENTROPY_COEF_ENV = "KAPPA_ENTROPY_REWARD_COEF"
ENTROPY_STEPS_ENV = "KAPPA_ENTROPY_REWARD_STEPS"
# total_training_steps ends the run; the epoch count must merely not end it first.
_EPOCHS = 100_000
_SAFE = re.compile(r"^[A-Za-z0-9_/\-+.:@%]+$")
# verl has no "no clipping" switch: an infinite ratio is a huge finite one.
UNCLIPPED = 1e9
ACTOR = "actor_rollout_ref.actor."
ROLLOUT = "actor_rollout_ref.rollout."
# verl writes this beside the global_step_<N>/ folders after each save.
TRACKER_FILE = "latest_checkpointed_iteration.txt"

HydraScalar = str | int | float | bool


@dataclass(frozen=True)
class Phase:
    """One launch of a cell: steps ``start_step`` .. ``end_step`` (verl's total_training_steps)."""

    index: int
    name: str
    start_step: int
    end_step: int
    intervention: bool
    evaluation: bool = False

    @property
    def resumes(self) -> bool:
        """Whether this phase continues from an earlier one's checkpoint."""
        return self.start_step > 0


def phases(settings: VerlSettings) -> list[Phase]:
    """A cell's launches: one training launch, two when an intervention ends before
    ``max_steps``; then, with ``eval_files``, an evaluation (``val_only``) of the last one."""
    n = settings.intervention_steps
    total = settings.max_steps
    if settings.entropy_intervention == "none" or n == 0:
        out = [Phase(0, "run", 0, total, intervention=False)]
    elif n is None or n >= total:
        out = [Phase(0, "run", 0, total, intervention=True)]
    else:
        out = [Phase(0, "intervention", 0, n, intervention=True),
               Phase(1, "after_intervention", n, total, intervention=False)]
    if settings.eval_files:
        out.append(Phase(len(out), "eval", total, total, intervention=False, evaluation=True))
    return out


def checkpoint_dir(run_dir: Path) -> Path:
    """The absolute folder verl saves to and resumes from (shared by every phase)."""
    return run_dir.resolve() / "checkpoints"


def checkpointed_step(run_dir: Path) -> int:
    """The last step verl saved a checkpoint for in ``run_dir`` (0 if none)."""
    try:
        return int((checkpoint_dir(run_dir) / TRACKER_FILE).read_text().strip())
    except (OSError, ValueError):
        return 0


def eval_marker(run_dir: Path) -> Path:
    """Written by the phase driver once the final evaluation succeeded."""
    return run_dir.resolve() / "eval_done.json"


def pending_phases(settings: VerlSettings, run_dir: Path) -> list[Phase]:
    """The phases still to run: not checkpointed to their end, or an evaluation not done."""
    done = checkpointed_step(run_dir)
    return [p for p in phases(settings)
            if (not eval_marker(run_dir).exists() if p.evaluation else done < p.end_step)]


def hydra_value(value: HydraScalar | Sequence[str]) -> str:
    """Render ``value`` in Hydra's override grammar (quoting strings that need it)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        if _SAFE.match(value):
            return value
        escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("${", "\\${")
        return f"'{escaped}'"
    return "[" + ",".join(hydra_value(v) for v in value) + "]"


def reward_function_path(settings: VerlSettings) -> str:
    """Absolute path of the plug-in's reward file (plugins/README.md), without importing it."""
    if settings.reward_function_path:
        return settings.reward_function_path
    spec = importlib.util.find_spec(PLUGIN_MODULE)
    if spec is not None and spec.submodule_search_locations:
        return str(Path(next(iter(spec.submodule_search_locations))) / "rewards.py")
    # Not installed here (e.g. planning on a laptop): the repository checkout's copy.
    return str(Path(__file__).resolve().parents[3] / "plugins" / PLUGIN_MODULE / "rewards.py")


def phase_env(settings: VerlSettings, phase: Phase) -> dict[str, str]:
    """What the plug-in reads in verl's trainer during ``phase``: an ``entropy_reward`` hook
    is explicitly off (coefficient 0) outside the intervention phase, so a later phase never
    inherits the bonus from an environment carrying the cell's values (:func:`launch_env`)."""
    env = {"VERL_USE_EXTERNAL_MODULES": PLUGIN_MODULE}
    if settings.entropy_intervention == "entropy_reward":
        on = phase.intervention
        env[ENTROPY_COEF_ENV] = repr(settings.entropy_coef) if on else "0"
        env[ENTROPY_STEPS_ENV] = str(phase.end_step) if on else "0"
    return env


def launch_env(settings: VerlSettings) -> dict[str, str]:
    """The plug-in's variables of the first phase, for a Ray job's runtime_env; each phase's
    command sets its own in ``ray.init``, which win (``RAY_OVERRIDE_JOB_RUNTIME_ENV=1``)."""
    return phase_env(settings, phases(settings)[0])


def _ratio(value: float) -> float:
    return UNCLIPPED if math.isinf(value) else value


def _algorithm(s: VerlSettings, phase: Phase) -> dict[str, HydraScalar]:
    a = s.algorithm
    o: dict[str, HydraScalar] = {
        # verl has no drgrpo estimator: Dr.GRPO is grpo without std normalisation.
        "algorithm.adv_estimator": "reward_budget" if a.advantage == "reward_budget" else "grpo",
        "algorithm.norm_adv_by_std_in_grpo": a.normalise_by_std,
        "algorithm.use_kl_in_reward": False,
        "algorithm.filter_groups.enable": a.dynamic_sampling,
    }
    if a.dynamic_sampling:
        # Drop groups whose *accuracy* is uniform: κ-scaled rewards keep acc in {0, 1}.
        o["algorithm.filter_groups.metric"] = "acc"
    o[ACTOR + "policy_loss.loss_mode"] = a.loss
    for key, value in a.policy_loss_params.items():
        o[ACTOR + "policy_loss." + key] = value
    o |= {
        ACTOR + "loss_agg_mode": a.loss_agg_mode,
        ACTOR + "clip_ratio_low": _ratio(a.clip_ratio_low),
        ACTOR + "clip_ratio_high": _ratio(a.clip_ratio_high),
        ACTOR + "clip_ratio_c": _ratio(a.clip_ratio_c),
        ACTOR + "use_kl_loss": a.use_kl_loss,
        ACTOR + "kl_loss_coef": a.kl_coef,
        ACTOR + "kl_loss_type": a.kl_loss_type,
        ACTOR + "entropy_coeff": s.entropy_coef
        if phase.intervention and s.entropy_intervention == "entropy_loss" else 0.0,
    }
    return o


def _training(s: VerlSettings) -> dict[str, HydraScalar | Sequence[str]]:
    o: dict[str, HydraScalar | Sequence[str]] = {
        "data.train_files": list(s.train_files),
        "data.train_batch_size": s.prompts_per_step,
        "data.max_prompt_length": s.max_prompt_length,
        "data.max_response_length": s.max_response_length,
        "data.filter_overlong_prompts": True,
        "data.truncation": "error",
        "data.seed": s.seed,
        "actor_rollout_ref.model.path": s.model_path,
        ACTOR + "optim.lr": s.learning_rate,
        ACTOR + "optim.weight_decay": s.weight_decay,
        ACTOR + "optim.lr_warmup_steps_ratio": 0.0,
        ACTOR + "optim.lr_scheduler_type": "constant",
        ACTOR + "ppo_mini_batch_size": s.ppo_mini_batch_size or s.prompts_per_step,
        ACTOR + "ppo_micro_batch_size_per_gpu": s.ppo_micro_batch_size_per_gpu,
        ACTOR + "ppo_epochs": s.ppo_epochs,
        ROLLOUT + "name": s.rollout_engine,
        ROLLOUT + "n": s.group_size,
        ROLLOUT + "temperature": s.temperature,
        ROLLOUT + "tensor_model_parallel_size": s.tensor_parallel_size,
        ROLLOUT + "gpu_memory_utilization": s.gpu_memory_utilization,
        ROLLOUT + "log_prob_micro_batch_size_per_gpu": s.log_prob_micro_batch_size_per_gpu,
        ROLLOUT + "seed": s.seed,
    }
    if s.algorithm.use_kl_loss:
        o["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"] = \
            s.log_prob_micro_batch_size_per_gpu
    return o


def _validation(s: VerlSettings, phase: Phase) -> dict[str, HydraScalar | Sequence[str]]:
    files, n, temperature = ((s.eval_files, s.eval_samples, s.eval_temperature)
                             if phase.evaluation
                             else (s.val_files, s.val_samples, s.val_temperature))
    return {
        "data.val_files": list(files),
        ROLLOUT + "val_kwargs.n": n,
        ROLLOUT + "val_kwargs.temperature": temperature,
        ROLLOUT + "val_kwargs.do_sample": temperature > 0,
    }


def _reward(s: VerlSettings) -> dict[str, HydraScalar]:
    kwargs = "+reward.custom_reward_function.reward_kwargs."
    o: dict[str, HydraScalar] = {
        "reward.custom_reward_function.path": reward_function_path(s),
        "reward.custom_reward_function.name": "compute_score",
        kwargs + "reward_correct": float(s.reward_correct),
        kwargs + "reward_incorrect": float(s.reward_incorrect),
        kwargs + "reward_type": s.reward_type,
        kwargs + "seed": s.seed,
    }
    if s.algorithm.overlong_penalty:
        buffer = "+reward.reward_kwargs.overlong_buffer_cfg."
        o |= {
            "reward.reward_manager.name": "dapo",
            buffer + "enable": True,
            buffer + "len": s.algorithm.overlong_buffer,
            buffer + "penalty_factor": s.overlong_penalty_factor,
            buffer + "log": False,
            "+reward.reward_kwargs.max_resp_len": s.max_response_length,
        }
    return o


def _trainer(s: VerlSettings, run_dir: Path, phase: Phase) -> dict[str, HydraScalar]:
    run_dir = run_dir.resolve()
    return {  # verl's run names: the sweep and the cell unless given
        "trainer.project_name": s.project_name or run_dir.parent.name,
        "trainer.experiment_name": s.experiment_name or run_dir.name,
        # Not verl's MLflow logger: the phase driver sends verl's file log to MLflow
        # through the run folder's outbox, exactly once across outages and resumes.
        "trainer.logger": "[console,file]",
        "trainer.nnodes": s.nnodes,
        "trainer.n_gpus_per_node": s.n_gpus_per_node,
        "trainer.total_epochs": _EPOCHS,
        "trainer.total_training_steps": phase.end_step,
        "trainer.save_freq": s.checkpoint_every,
        "trainer.test_freq": s.val_every,
        # An evaluation phase validates the final checkpoint once and stops (val_only).
        "trainer.val_before_train": phase.evaluation or not phase.resumes,
        "trainer.val_only": phase.evaluation,
        "trainer.resume_mode": "auto",
        "trainer.default_local_dir": str(checkpoint_dir(run_dir)),
    }


def verl_command(settings: VerlSettings, run_dir: Path, *, phase: Phase | None = None,
                 forward_env: Mapping[str, str] | None = None) -> list[str]:
    """The argv of one ``phase`` of ``settings`` in ``run_dir`` (default: the only one; a
    two-phase cell must name it). ``forward_env`` (e.g. ``MLFLOW_RUN_ID``) reaches verl's
    Ray workers through the ``ray.init`` runtime_env, with the plug-in's variables."""
    if phase is None:
        all_phases = phases(settings)
        if len(all_phases) != 1:
            raise ValueError(f"this cell runs in {len(all_phases)} phases; pass phase=")
        phase = all_phases[0]
    overrides: dict[str, HydraScalar | Sequence[str]] = {
        **_algorithm(settings, phase), **_training(settings), **_validation(settings, phase),
        **_reward(settings), **_trainer(settings, run_dir, phase)}
    env = phase_env(settings, phase) | dict(forward_env or {})
    overrides |= {ENV_PREFIX + name: env[name] for name in sorted(env)}
    rendered = (f"{key}={value if key == 'trainer.logger' else hydra_value(value)}"
                for key, value in overrides.items())  # trainer.logger is a Hydra list already
    return [settings.python, "-m", ENTRY_MODULE, *rendered, *settings.extra_overrides]
