"""verl 0.9.1's actor update with each baseline's loss settings, on CPU with a tiny model.

In verl 0.9.1 the actor update is ``ActorRolloutRefWorker.update_actor`` ->
``TrainingWorker.train_mini_batch``/``train_batch`` -> the FSDP engine's
``train_batch`` (``forward_backward_batch`` -> ``FSDPEngineWithLMHead.forward_step`` ->
``prepare_model_inputs``/``prepare_model_outputs`` -> ``ppo_loss`` -> the registered
policy loss -> ``loss.backward()``; then ``optimizer_step``: clip, step, grad norm).

What runs for real here: that engine ``train_batch`` — verl's own micro-batching,
forward step, log-prob extraction, ``ppo_loss`` with the ``ActorConfig`` our command's
overrides compose to (loss mode, aggregation, clip ratios, KL loss, Clip-Cov/KL-Cov
parameters), backward and ``optimizer_step`` with verl's optimizer (``build_optimizer``
of the composed ``actor.optim``) — on a Qwen2-shaped model built locally
(``tiny_model.build_tiny_model``), in a gloo process group of one. The old log-probs
come from the same engine's ``infer_batch`` (verl's ``compute_log_prob`` path).

What cannot run on a machine without CUDA, and is therefore not run:
* ``TrainingWorker.__init__`` / ``FSDPEngine.initialize``: the engine registry has FSDP
  only for ``device=["cuda", "npu"]``, and verl's ``get_device_id()`` is
  ``torch.cuda.current_device()`` (``verl/plugin/platform/platform_cuda.py``), which
  raises "Torch not compiled with CUDA enabled". So the model is the plain
  ``transformers`` module, not FSDP-wrapped (no sharding, no device mesh), and
  ``transformer_impl.get_device_id``/``get_device_name`` are pointed at ``"cpu"`` — the
  CUDA lookups left on the ``train_batch`` path (``.to(get_device_id())`` of the batch
  and the token count, the forward-only loss placeholder's device).
* bf16 autocast and ``use_remove_padding=True`` (verl's default, flash-attn varlen on
  packed sequences): here float32 and the padded path (``use_remove_padding=False``).
* Ray dispatch to worker groups, rollout with vLLM/SGLang, multi-GPU data parallelism:
  the GPU smoke test (``kappa smoke verl``) covers those.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("verl")
pytest.importorskip("kappa_verl")

from verl_cpu_support import BASELINES, compose, tiny_cell

LR = 1e-3  # large enough that one step visibly moves the weights
BATCH, GROUP = 2, 4


@pytest.fixture(scope="module")
def process_group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A gloo process group of one (verl all-reduces the batch's token count over it)."""
    import torch.distributed as dist

    if dist.is_initialized():
        yield
        return
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _actor_config(model_dir: Path, tmp_path: Path, baseline: str,
                  **overrides: Any) -> tuple[Any, Any]:
    """verl's composed config of the cell and its strict ``ActorConfig`` (as the worker builds it).

    Checks that the bundle's loss settings arrived in the dataclass the loss reads.
    """
    from verl.utils.config import omega_conf_to_dataclass

    cell = tiny_cell(model_dir, tmp_path, baseline=baseline, learning_rate=LR,
                     ppo_micro_batch_size_per_gpu=GROUP, group_size=GROUP,
                     prompts_per_step=BATCH, **overrides)
    config = compose(cell, tmp_path / "run")
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    bundle = cell.algorithm
    assert (actor.policy_loss.loss_mode, actor.loss_agg_mode, actor.use_kl_loss) == (
        bundle.loss, bundle.loss_agg_mode, bundle.use_kl_loss)
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.clip_ratio_c) == (
        bundle.clip_ratio_low, bundle.clip_ratio_high, bundle.clip_ratio_c)
    for key, value in bundle.policy_loss_params.items():
        assert getattr(actor.policy_loss, key) == value
    assert actor.optim.lr == LR
    return config, actor


def _engine(model_dir: Path, actor: Any) -> Any:
    """verl's FSDP engine class around the plain tiny model (see the module docstring)."""
    from transformers import AutoModelForCausalLM
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    module = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32,
                                                  attn_implementation="eager")
    engine = object.__new__(FSDPEngineWithLMHead)
    engine.module = module
    engine.engine_config = actor.engine
    engine.optimizer_config = actor.optim
    engine.ulysses_device_mesh = None
    engine.ulysses_sequence_parallel_size = 1
    engine.use_ulysses_sp = False
    engine.pad_to_length = False
    engine.scaler = None
    engine._qat_enabled = False
    engine._autocast_dtype = torch.float32
    engine.optimizer = engine._build_optimizer(module)
    return engine


def _rollout_data(seed: int, vocab: int) -> Any:
    """``BATCH × GROUP`` jagged rows as the actor receives them from TransferQueue."""
    from tensordict import TensorDict

    gen = torch.Generator().manual_seed(seed)
    rows: dict[str, list[torch.Tensor]] = {k: [] for k in (
        "prompts", "responses", "input_ids", "position_ids", "response_mask", "loss_mask",
        "advantages")}
    for i in range(BATCH * GROUP):
        p_len = int(torch.randint(4, 9, (1,), generator=gen))
        r_len = int(torch.randint(3, 12, (1,), generator=gen))
        prompt = torch.randint(3, vocab, (p_len,), generator=gen)
        response = torch.randint(3, vocab, (r_len,), generator=gen)
        advantage = torch.randn(1, generator=gen) + (1.0 if i % 2 else -1.0)
        rows["prompts"].append(prompt)
        rows["responses"].append(response)
        rows["input_ids"].append(torch.cat([prompt, response]))
        rows["position_ids"].append(torch.arange(p_len + r_len))
        rows["response_mask"].append(torch.ones(r_len, dtype=torch.int64))
        rows["loss_mask"].append(torch.ones(r_len, dtype=torch.int64))
        rows["advantages"].append(advantage.expand(r_len).clone())
    return TensorDict({k: torch.nested.as_nested_tensor(v, layout=torch.jagged)
                       for k, v in rows.items()}, batch_size=BATCH * GROUP)


def _engine_keys(data: Any, config: Any, actor: Any) -> None:
    """The non-tensor keys the trainer's ``_update_actor`` and ``TrainingWorker`` add."""
    from verl.utils import tensordict_utils as tu

    tu.assign_non_tensor(
        data, calculate_entropy=actor.entropy_coeff != 0.0 or actor.calculate_entropy,
        global_batch_size=BATCH * GROUP,
        temperature=float(config.actor_rollout_ref.rollout.temperature),
        use_remove_padding=False, use_dynamic_bsz=False, use_fused_kernels=False,
        micro_batch_size_per_gpu=actor.ppo_micro_batch_size_per_gpu,
        max_token_len_per_gpu=actor.ppo_max_token_len_per_gpu)


def _response_values(nested_full: Any, data: Any) -> Any:
    """Per-response values (jagged) of a whole-sequence engine output, as verl slices them."""
    from verl.workers.utils.padding import no_padding_2_padding, response_to_nested

    padded = no_padding_2_padding(nested_full, data)
    return response_to_nested(padded, data["response_mask"])


@pytest.mark.parametrize(("baseline", "intervention"),
                         [(b, "none") for b in BASELINES] + [("grpo", "entropy_loss")])
def test_engine_train_batch_with_each_baseline_loss(baseline: str, intervention: str,
                                                    tiny_model_dir: Path,
                                                    tmp_path: Path, process_group: None,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from verl.utils.metric import Metric
    from verl.workers.engine.fsdp import transformer_impl
    from verl.workers.utils.losses import ppo_loss

    monkeypatch.setattr(transformer_impl, "get_device_id", lambda: "cpu")
    monkeypatch.setattr(transformer_impl, "get_device_name", lambda: "cpu")
    config, actor = _actor_config(tiny_model_dir, tmp_path, baseline,
                                  entropy_intervention=intervention)
    assert actor.entropy_coeff == (0.01 if intervention == "entropy_loss" else 0.0)
    engine = _engine(tiny_model_dir, actor)
    vocab = engine.module.config.vocab_size
    data = _rollout_data(seed=BASELINES.index(baseline), vocab=vocab)
    _engine_keys(data, config, actor)

    # old (and reference) log-probs: the engine's forward-only pass (verl's compute_log_prob)
    with torch.no_grad():
        inferred = engine.infer_batch(data)
    old = _response_values(inferred["model_output"]["log_probs"], data)
    gen = torch.Generator().manual_seed(1)
    # A small drift between the rollout policy and this one, so ratios and clipping vary.
    drift = torch.nested.as_nested_tensor(
        [t + 0.05 * torch.randn(t.shape, generator=gen) for t in old.unbind()],
        layout=torch.jagged)
    data["old_log_probs"] = drift
    if actor.use_kl_loss:
        data["ref_log_prob"] = old

    before = [p.detach().clone() for p in engine.module.parameters()]
    outputs = engine.train_batch(data, loss_function=partial(ppo_loss, config=actor))

    metrics = outputs["metrics"]
    grad_norm = metrics["grad_norm"]
    # verl's own reduction of per-micro-batch metrics (TrainingWorker.train_mini_batch)
    pg_loss = Metric.aggregate_dp(_as_list(metrics["actor/pg_loss"]))
    print(f"{baseline}: loss_mode={actor.policy_loss.loss_mode} "
          f"agg={actor.loss_agg_mode} pg_loss={pg_loss} grad_norm={grad_norm}")
    assert actor.policy_loss.loss_mode == {"gspo": "gspo", "clip_cov": "clip_cov",
                                           "kl_cov": "kl_cov"}.get(baseline, "vanilla")
    assert math.isfinite(pg_loss)
    assert math.isfinite(grad_norm) and grad_norm > 0
    changed = sum(not torch.equal(a, b.detach())
                  for a, b in zip(before, engine.module.parameters(), strict=True))
    assert changed > 0, "one optimizer step must change the weights"
    if actor.use_kl_loss:
        assert "kl_loss" in metrics
    # The entropy bonus (entropy_loss intervention): verl computes the entropy and logs it.
    assert ("actor/entropy_loss" in metrics) == (intervention == "entropy_loss")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_fsdp_engine_setup_needs_cuda() -> None:
    """Pins the reason the engine above is not built by verl itself on this machine."""
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: verl's FSDP engine can be built here")
    from verl.utils.device import get_device_id

    with pytest.raises((AssertionError, RuntimeError), match="CUDA"):
        get_device_id()

