"""verl 0.9.1's advantage step, as the V1 trainer runs it, against ``orchestrator.algorithms``.

What runs for real: ``PPOTrainerSync._compute_advantage`` — verl's own method, wrapped by
kappa_verl's entropy-to-reward hook on import — reading ``rm_scores``/``entropy``/``uid``
rows from the store, ``compute_advantage_for_multi_trajectories`` and verl's
``compute_advantage`` dispatcher (``grpo`` built in, ``reward_budget`` from our plug-in),
writing ``advantages``/``returns`` back. Every cell's ``algorithm.*`` and
``rollout.n`` come from verl's Hydra config composed with the overrides our command emits,
for each baseline with and without reward budgeting (GSPO, DAPO, Clip-Cov and KL-Cov use
grpo advantages; Dr.GRPO is grpo without std normalisation).

What is replaced: in the default run, TransferQueue (a set of Ray actors) by
:class:`verl_cpu_support.LocalKV`, an in-process store with TransferQueue's API and
return types; the slow test runs the same checks over the real TransferQueue on a local
Ray. The rows are written as verl's ``AgentLoopWorkerTQ`` writes them (one jagged row
per response, reward on its last token, key ``{uid}_{session}_{index}``), but the
entropy comes from here, not from an actor's forward pass (that needs the training
engine, i.e. a GPU: see test_verl_cpu_policy_loss.py).
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("verl")
pytest.importorskip("kappa_verl")

from kappa_verl import entropy_reward as er
from verl_cpu_support import CELLS, LocalKV, compose, tiny_cell

from orchestrator.algorithms.advantages import advantages
from orchestrator.algorithms.masking import masked_mean
from orchestrator.algorithms.rewards import entropy_reward

GROUPS, LENGTH = 4, 6


@pytest.fixture(scope="module")
def trainer_base() -> Any:
    """verl's V1 trainer module (imported after kappa_verl, so the hook is on it)."""
    from verl.trainer.ppo.v1 import trainer_base

    assert getattr(trainer_base.PPOTrainer._compute_advantage, "_kappa_entropy_reward", False)
    return trainer_base


def _rollouts(n: int, seed: int) -> tuple[list[str], list[dict[str, Any]]]:
    """Rows of ``GROUPS`` prompts × ``n`` responses in shuffled order, as the agent loop writes.

    Scores are κ-scaled verifier rewards (5 / -1) on the last token, one group all correct
    (GRPO's zero-variance case); lengths and entropies are random.
    """
    gen = torch.Generator().manual_seed(seed)
    keys, fields = [], []
    for g in range(GROUPS):
        for s in range(n):
            length = int(torch.randint(1, LENGTH + 1, (1,), generator=gen))
            correct = True if g == 0 else bool(torch.rand(1, generator=gen) < 0.5)
            rm_scores = torch.zeros(length)
            rm_scores[-1] = 5.0 if correct else -1.0
            keys.append(f"prompt{g}_{s}_0")
            fields.append({"uid": f"prompt{g}", "rm_scores": rm_scores,
                           "response_mask": torch.ones(length, dtype=torch.int64),
                           "entropy": torch.rand(length, generator=gen) * 3})
    order = torch.randperm(len(keys), generator=gen).tolist()
    return [keys[i] for i in order], [fields[i] for i in order]


def _expected(config: Any, fields: list[dict[str, Any]], coef: float) -> torch.Tensor:
    """orchestrator.algorithms' advantages of the rows, padded ``(bs, LENGTH)``."""
    scores = torch.stack([f["rm_scores"].sum() for f in fields])
    if coef:
        seq_entropy = torch.stack([masked_mean(f["entropy"], f["response_mask"].float())
                                   for f in fields])
        scores = entropy_reward(scores, seq_entropy, coef)
    algo = config.algorithm
    if algo.adv_estimator == "reward_budget":
        name, options = "reward_budget", {}
    elif algo.norm_adv_by_std_in_grpo:
        name, options = "grpo", {"std": "unbiased"}
    else:
        name, options = "drgrpo", {}
    out = torch.zeros(len(fields), LENGTH)
    uids = sorted({f["uid"] for f in fields})
    for uid in uids:
        rows = torch.tensor([i for i, f in enumerate(fields) if f["uid"] == uid])
        per_row = advantages(name, scores[rows].unsqueeze(0), **options).squeeze(0)
        for row, value in zip(rows.tolist(), per_row.tolist(), strict=True):
            out[row, :len(fields[row]["rm_scores"])] = value
    return out


def run_advantage_step(trainer_base: Any, store: Any, config: Any, coef: float,
                       seed: int, monkeypatch: pytest.MonkeyPatch,
                       env: dict[str, str] | None = None) -> Any:
    """Put one step's rollouts, run verl's ``_compute_advantage``, compare with ours.

    Returns what the step wrote back (padded ``advantages``, ``returns``, ``rm_scores``).
    """
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    n = int(config.actor_rollout_ref.rollout.n)
    keys, fields = _rollouts(n, seed)
    partition = f"train-{uuid.uuid4().hex}"  # a fresh partition of the (possibly shared) store
    meta = store.kv_batch_put(keys=keys, partition_id=partition,
                              fields=list_of_dict_to_tensordict(fields))
    for name, value in (env or {er.COEF_ENV: repr(coef), er.STEPS_ENV: "3"}).items():
        monkeypatch.setenv(name, value)
    trainer = object.__new__(PPOTrainerSync)  # the step needs only its config and step count
    trainer.config = config
    trainer.global_steps = 1
    metrics: dict[str, Any] = {}
    trainer._compute_advantage(meta, metrics)

    got = store.kv_batch_get(keys=keys, partition_id=partition,
                             select_fields=["advantages", "returns", "rm_scores"])
    padded = got.to_padded_tensor()
    expected = _expected(config, fields, coef)
    width = padded["advantages"].shape[-1]
    # verl works in float32, ours in float64: an all-correct group whose rewards differ
    # only by the entropy bonus (5 + 0.05·H, spread ~0.01) loses ~1e-5 of its deviations to
    # float32 rounding. Real differences (std kind, a missing bonus, another estimator) are
    # above 1e-2.
    torch.testing.assert_close(padded["advantages"], expected[:, :width], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(padded["returns"], expected[:, :width], rtol=1e-4, atol=1e-4)
    assert width == max(len(f["rm_scores"]) for f in fields)
    if coef:
        assert metrics["kappa/entropy_reward/active"] == 1.0
        assert metrics["kappa/entropy_reward/mean"] > 0
    # Advantages are not all zero: the check cannot pass vacuously.
    assert padded["advantages"].abs().sum() > 0
    return padded


@pytest.mark.parametrize("coef", [0.0, 0.05])
@pytest.mark.parametrize(("baseline", "reward_budget"), CELLS)
def test_v1_compute_advantage_equals_ours(baseline: str, reward_budget: bool, coef: float,
                                          cell_configs: dict[tuple[str, bool], Any],
                                          trainer_base: Any,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    config = cell_configs[(baseline, reward_budget)]
    assert config.algorithm.adv_estimator == ("reward_budget" if reward_budget else "grpo")
    assert bool(config.algorithm.norm_adv_by_std_in_grpo) == (baseline != "drgrpo")
    store = LocalKV()
    monkeypatch.setattr(trainer_base, "tq", store)
    seed = zlib.crc32(f"{baseline}-{reward_budget}-{coef}".encode()) % 10_000
    print(f"seed {seed}")
    run_advantage_step(trainer_base, store, config, coef, seed, monkeypatch)


def test_entropy_reward_cell_switches_the_hook_on_through_its_runtime_env(
        tmp_path: Path, trainer_base: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``entropy_reward`` cell: the env vars our command puts in verl's ``ray.init``
    runtime_env are what the hook in the trainer process reads."""
    cell = tiny_cell(tmp_path / "model", tmp_path, reward_budget=True,
                     entropy_intervention="entropy_reward", entropy_coef=0.05)
    config = compose(cell, tmp_path / "run")
    env = {k: str(v) for k, v in config.ray_kwargs.ray_init.runtime_env.env_vars.items()}
    assert env[er.COEF_ENV] == "0.05" and env["VERL_USE_EXTERNAL_MODULES"] == "kappa_verl"
    store = LocalKV()
    monkeypatch.setattr(trainer_base, "tq", store)
    run_advantage_step(trainer_base, store, config, coef=0.05, seed=3,
                       monkeypatch=monkeypatch, env=env)


@pytest.fixture(scope="module")
def real_transfer_queue() -> Iterator[Any]:
    """TransferQueue 0.1.11 on a local Ray (controller and one storage unit as actors)."""
    ray = pytest.importorskip("ray")
    import transfer_queue as tq

    # address="local": a Ray of its own, never another test's or user's cluster.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        tq.init({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}})
        yield tq
        tq.close()
    finally:
        ray.shutdown()


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.parametrize(("baseline", "reward_budget", "coef"),
                         [("grpo", True, 0.05), ("grpo", False, 0.05), ("drgrpo", False, 0.0)])
def test_v1_compute_advantage_over_real_transfer_queue(
        baseline: str, reward_budget: bool, coef: float,
        cell_configs: dict[tuple[str, bool], Any], trainer_base: Any,
        real_transfer_queue: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same step with verl's ``tq`` the real TransferQueue; LocalKV writes the same."""
    assert trainer_base.tq is real_transfer_queue
    config = cell_configs[(baseline, reward_budget)]
    real = run_advantage_step(trainer_base, real_transfer_queue, config, coef, seed=7,
                              monkeypatch=monkeypatch)
    local = LocalKV()
    monkeypatch.setattr(trainer_base, "tq", local)
    stand_in = run_advantage_step(trainer_base, local, config, coef, seed=7,
                                  monkeypatch=monkeypatch)
    for name in ("advantages", "returns", "rm_scores"):
        assert torch.equal(real[name], stand_in[name]), name


def test_local_store_is_not_vacuous(tmp_path: Path) -> None:
    """LocalKV keeps rows apart per partition and returns jagged rows of their own lengths."""
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    store = LocalKV()
    rows = [{"uid": "a", "x": torch.ones(2)}, {"uid": "b", "x": torch.zeros(3)}]
    store.kv_batch_put(keys=["k1", "k2"], partition_id="p",
                       fields=list_of_dict_to_tensordict(rows))
    got = store.kv_batch_get(keys=["k2", "k1"], partition_id="p", select_fields=["x", "uid"])
    padded = got.to_padded_tensor()
    assert padded.pop("uid").tolist() == ["b", "a"]
    torch.testing.assert_close(padded["x"], torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]))
    with pytest.raises(KeyError):
        store.kv_batch_get(keys=["k1"], partition_id="other", select_fields=["x"])
