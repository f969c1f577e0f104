"""Helpers of the verl-on-CPU tests: our cells composed by verl's Hydra, rollout-shaped batches.

Nothing here replaces verl's own code: the config is verl's ``ppo_trainer`` composed with
the overrides :func:`~orchestrator.backends.verl.command.verl_command` emits, batches
are laid out as verl's agent loop lays them out (prompts left-padded, responses
right-padded, ``rm_scores`` on the last valid response token), and the reward loop's
Ray transport is the only thing :func:`score_batch` replaces (its workers run in this
process instead of as Ray actors).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np
import torch

from orchestrator.backends.verl.command import verl_command
from orchestrator.backends.verl.settings import VerlSettings

BASELINES = ("grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov")
# Every (baseline, reward_budget) cell: the advantage step's estimator settings.
CELLS = [(baseline, rb) for baseline in BASELINES for rb in (False, True)]


def tiny_cell(model_path: Path, data_dir: Path, **overrides: Any) -> VerlSettings:
    """A one-GPU cell of the tiny model: small batches, short prompts and responses."""
    base: dict[str, Any] = dict(
        model_path=str(model_path), train_files=str(data_dir / "train.parquet"),
        val_files=str(data_dir / "val.parquet"), n_gpus_per_node=1, group_size=4,
        prompts_per_step=2, max_prompt_length=256, max_response_length=64,
        overlong_buffer=16)
    return VerlSettings.model_validate(base | overrides)


def compose(settings: VerlSettings, run_dir: Path, extra: Sequence[str] = ()) -> Any:
    """verl's ``ppo_trainer`` config composed with the cell's command-line overrides."""
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    overrides = verl_command(settings, run_dir)[3:] + list(extra)
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose("ppo_trainer", overrides=overrides)


@dataclass(frozen=True)
class Sample:
    """One rollout: the dataset row's fields and the generated response text."""

    prompt: str
    response: str
    ground_truth: str
    data_source: str = "math_dapo"
    index: int = 0
    uid: str = "p0"
    extra: Mapping[str, Any] = field(default_factory=dict)


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def rollout_batch(tokenizer: Any, samples: Sequence[Sample]) -> Any:
    """A ``DataProto`` laid out like verl's agent-loop output for ``samples``.

    Prompts are the chat template applied to the prompt text; the dataset fields
    (``data_source``, ``reward_model``, ``extra_info``, ``uid``) go to ``non_tensor_batch``
    where verl's reward managers read them.
    """
    prompts = [list(tokenizer.apply_chat_template(
        [{"role": "user", "content": s.prompt}], add_generation_prompt=True, tokenize=True,
        return_dict=False)) for s in samples]
    non_tensors = {
        "data_source": [s.data_source for s in samples],
        "reward_model": [{"style": "rule", "ground_truth": s.ground_truth} for s in samples],
        "extra_info": [{"index": s.index, "split": "train", **s.extra} for s in samples],
        "uid": [s.uid for s in samples],
    }
    return batch_from(tokenizer, prompts, [s.response for s in samples], non_tensors)


def batch_from(tokenizer: Any, prompts: Sequence[Sequence[int]], responses: Sequence[str],
               non_tensors: Mapping[str, Sequence[Any]]) -> Any:
    """Prompt ids (left-padded) and response texts + EOS (right-padded) as a ``DataProto``."""
    from verl import DataProto

    response_ids = [[*_encode(tokenizer, text), tokenizer.eos_token_id] for text in responses]
    pad = tokenizer.pad_token_id
    p_len, r_len = max(map(len, prompts)), max(map(len, response_ids))
    bs = len(prompts)
    prompt_t = torch.full((bs, p_len), pad, dtype=torch.long)
    response_t = torch.full((bs, r_len), pad, dtype=torch.long)
    attention = torch.zeros(bs, p_len + r_len, dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, response_ids, strict=True)):
        prompt_t[i, p_len - len(p):] = torch.tensor(list(p))
        response_t[i, :len(r)] = torch.tensor(r)
        attention[i, p_len - len(p):p_len + len(r)] = 1
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    return DataProto.from_dict(
        tensors={"prompts": prompt_t, "responses": response_t,
                 "input_ids": torch.cat([prompt_t, response_t], dim=-1),
                 "attention_mask": attention, "position_ids": position_ids,
                 "response_mask": attention[:, p_len:].clone()},
        non_tensors={k: np.array(list(v), dtype=object) for k, v in non_tensors.items()})


class _InProcessCall:
    """``handle.method.remote(*args)`` of a Ray actor, run to completion in this process."""

    def __init__(self, worker: Any, method: str) -> None:
        self._worker = worker
        self._method = method

    def remote(self, *args: Any) -> Any:
        coroutine = getattr(self._worker, self._method)(*args)
        return self._worker.loop.run_until_complete(coroutine)


def in_process_handle(worker: Any) -> SimpleNamespace:
    """A stand-in for ``ray.remote(RewardLoopWorker)``'s handle around a local worker."""
    return SimpleNamespace(compute_score=_InProcessCall(worker, "compute_score"),
                           compute_score_batch=_InProcessCall(worker, "compute_score_batch"))


@contextmanager
def reward_loop(config: Any, workers: int = 2) -> Iterator[Any]:
    """verl's ``RewardLoopManager`` whose ``RewardLoopWorker``s live in this process.

    The manager's own ``compute_rm_score`` runs unchanged (padding to the workers,
    chunking, ``assemble_rm_scores``, ``reward_extra_info`` into ``non_tensor_batch``);
    only Ray's actor creation and ``ray.get`` are replaced, since the workers' results
    are already values here.
    """
    from verl.experimental.reward_loop import reward_loop as rl

    manager = object.__new__(rl.RewardLoopManager)
    manager.config = config
    manager.reward_model_manager = None
    manager.reward_router_address = None
    manager.reward_manager_cls = rl.resolve_reward_manager_cls(config)
    manager.reward_loop_workers = [in_process_handle(rl.RewardLoopWorker(config))
                                   for _ in range(workers)]
    with mock.patch.object(rl, "ray", SimpleNamespace(get=lambda results: list(results))):
        yield manager


class LocalKV:
    """TransferQueue's ``kv_batch_put``/``kv_batch_get`` over a dict, in this process.

    Rows are kept per ``(partition, key)`` and returned as TransferQueue 0.1.11 returns
    them (checked against the real one in the slow test): tensors as jagged nested
    tensors, anything else (``uid``) as a ``NonTensorStack``.
    """

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}

    def kv_batch_put(self, keys: Sequence[str], partition_id: str, fields: Any = None,
                     tags: Any = None) -> Any:
        from transfer_queue import KVBatchMeta

        names = list(fields.keys()) if fields is not None else []
        for name in names:
            value = fields.get(name)
            items = value.unbind(0) if isinstance(value, torch.Tensor) else value.tolist()
            for key, item in zip(keys, items, strict=True):
                self.rows.setdefault((partition_id, key), {})[name] = item
        return KVBatchMeta(partition_id=partition_id, keys=list(keys),
                           tags=list(tags) if tags else [{} for _ in keys])

    def kv_batch_get(self, keys: Sequence[str], partition_id: str,
                     select_fields: Sequence[str]) -> Any:
        from tensordict import NonTensorStack, TensorDict

        out: dict[str, Any] = {}
        for name in select_fields:
            rows = [self.rows[(partition_id, k)].get(name) for k in keys]
            if any(r is None for r in rows):
                continue  # TransferQueue leaves out fields no row has
            if all(isinstance(r, torch.Tensor) for r in rows):
                out[name] = torch.nested.as_nested_tensor(rows, layout=torch.jagged)
            else:
                out[name] = NonTensorStack(*rows)
        return TensorDict(out, batch_size=len(keys))
