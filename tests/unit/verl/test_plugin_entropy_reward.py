"""The entropy-to-reward intervention: the arithmetic, the switch, and the trainer hook.

What runs here for real: the reward shaping on padded tensors, verl's own jagged-tensor
helpers, the post-import hook on the real ``verl.trainer.ppo.v1.trainer_base`` module.
What cannot run on a machine without GPUs: a V1 trainer step (it needs rollout servers);
its TransferQueue is therefore replaced, in one test, by a dict keyed like TransferQueue's
``kv_batch_get``/``kv_batch_put`` API.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("verl")
pytest.importorskip("kappa_verl")

from kappa_verl import entropy_reward as er
from tensordict import TensorDict

from orchestrator.algorithms.masking import masked_mean
from orchestrator.algorithms.rewards import entropy_reward


def test_bonus_lands_on_last_valid_token() -> None:
    scores = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    entropy = torch.tensor([[1.0, 2.0, 3.0, 99.0], [4.0, 99.0, 99.0, 99.0], [9.0, 9.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    shaped, bonus = er.add_entropy_to_scores(scores, entropy, mask, coef=0.01)
    torch.testing.assert_close(bonus, torch.tensor([0.02, 0.04, 0.0]))
    expected = scores.clone()
    expected[0, 2] += 0.02
    expected[1, 0] += 0.04
    torch.testing.assert_close(shaped, expected)
    assert scores[0, 2] == 1.0  # input untouched


def test_shaped_rewards_equal_the_algorithms_library() -> None:
    """One implementation: summed shaped scores are entropy_reward(R, masked_mean(H), c)."""
    gen = torch.Generator().manual_seed(0)
    lengths = torch.tensor([5, 1, 8, 3, 0, 8])
    mask = (torch.arange(8).unsqueeze(0) < lengths.unsqueeze(1)).long()
    entropy = torch.rand(6, 8, generator=gen) * 3
    outcome = torch.tensor([1.0, 0.0, 5.0, -1.0, 0.0, 0.5])
    scores = torch.zeros(6, 8)
    rows = torch.nonzero(lengths > 0).squeeze(-1)
    scores[rows, lengths[rows] - 1] = outcome[rows]  # verl puts the reward on the last token
    shaped, bonus = er.add_entropy_to_scores(scores, entropy, mask, coef=0.05)
    expected = entropy_reward(outcome, masked_mean(entropy, mask.float(), dim=-1), 0.05)
    assert torch.equal(shaped[rows, lengths[rows] - 1], expected[rows])
    torch.testing.assert_close(shaped.sum(dim=-1)[rows], expected[rows])
    seq_entropy = masked_mean(entropy, mask.float(), dim=-1)
    assert torch.equal(bonus[rows], entropy_reward(torch.zeros(6), seq_entropy, 0.05)[rows])
    assert shaped[4].abs().sum() == 0 and bonus[4] == 0  # an empty response is untouched


def test_settings_window() -> None:
    s = er.EntropyRewardSettings.from_env({er.COEF_ENV: "0.01", er.STEPS_ENV: "500"})
    assert (s.active(1), s.active(500), s.active(501)) == (True, True, False)
    always = er.EntropyRewardSettings.from_env({er.COEF_ENV: "0.01"})
    assert always.active(10_000)
    assert not er.EntropyRewardSettings.from_env({}).active(1)
    with pytest.raises(ValueError, match=">= 0"):
        er.EntropyRewardSettings.from_env({er.COEF_ENV: "0.01", er.STEPS_ENV: "-1"})


def test_post_import_hook_runs_after_module_executes(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kappa_hook_target.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []
    er.install("kappa_hook_target", lambda module: seen.append(module.VALUE))
    try:
        import kappa_hook_target  # type: ignore[import-not-found]  # noqa: F401
        assert seen == [1]
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path
                            if getattr(f, "target", None) != "kappa_hook_target"]
        sys.modules.pop("kappa_hook_target", None)


def test_real_v1_trainer_is_patched_on_import() -> None:
    from verl.trainer.ppo.v1 import trainer_base  # imported after kappa_verl installed the hook

    assert getattr(trainer_base.PPOTrainer._compute_advantage, "_kappa_entropy_reward", False)
    assert er.patch_trainer(trainer_base) is False  # idempotent


class _DictStore:
    """TransferQueue's kv_batch_get/kv_batch_put on (partition, key) -> field -> 1-D tensor."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, torch.Tensor]] = {}

    def kv_batch_get(self, keys: list[str], partition_id: str,
                     select_fields: list[str]) -> TensorDict:
        return TensorDict({f: torch.nested.as_nested_tensor(
            [self.rows[(partition_id, k)][f] for k in keys], layout=torch.jagged)
            for f in select_fields}, batch_size=len(keys))

    def kv_batch_put(self, keys: list[str], partition_id: str, fields: TensorDict) -> None:
        for name, nested in fields.items():
            for key, row in zip(keys, nested.unbind(), strict=True):
                self.rows[(partition_id, key)][name] = row


def _trainer_module(store: _DictStore, seen: list[torch.Tensor]) -> types.ModuleType:
    class PPOTrainer:
        global_steps = 1

        def _compute_advantage(self, batch: Any, metrics: dict[str, Any]) -> Any:
            seen.extend(store.rows[(batch.partition_id, k)]["rm_scores"] for k in batch.keys)
            return batch

    module = types.ModuleType("fake_trainer_base")
    module.PPOTrainer = PPOTrainer  # type: ignore[attr-defined]
    module.tq = store  # type: ignore[attr-defined]
    return module


def test_wrapped_compute_advantage_shapes_rewards_only_inside_window(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = _DictStore()
    store.rows[("train", "a")] = {"rm_scores": torch.tensor([0.0, 0.0, 1.0]),
                                  "entropy": torch.tensor([1.0, 2.0, 3.0]),
                                  "response_mask": torch.tensor([1, 1, 1])}
    store.rows[("train", "b")] = {"rm_scores": torch.tensor([0.0]),
                                  "entropy": torch.tensor([5.0]),
                                  "response_mask": torch.tensor([1])}
    seen: list[torch.Tensor] = []
    module = _trainer_module(store, seen)
    assert er.patch_trainer(module)
    trainer = module.PPOTrainer()
    batch = types.SimpleNamespace(keys=["a", "b"], partition_id="train")
    monkeypatch.setenv(er.COEF_ENV, "0.5")
    monkeypatch.setenv(er.STEPS_ENV, "1")

    metrics: dict[str, Any] = {}
    trainer._compute_advantage(batch, metrics)
    torch.testing.assert_close(seen[0], torch.tensor([0.0, 0.0, 2.0]))  # 1 + 0.5 * mean(1,2,3)
    torch.testing.assert_close(seen[1], torch.tensor([2.5]))
    assert metrics["kappa/entropy_reward/active"] == 1.0
    assert metrics["kappa/entropy_reward/mean"] == pytest.approx(1.75)

    trainer.global_steps = 2  # past KAPPA_ENTROPY_REWARD_STEPS: no more shaping
    seen.clear()
    metrics = {}
    trainer._compute_advantage(batch, metrics)
    torch.testing.assert_close(seen[0], torch.tensor([0.0, 0.0, 2.0]))
    assert metrics["kappa/entropy_reward/active"] == 0.0
