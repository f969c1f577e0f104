"""The parquet files ``kappa data prepare`` writes, read by verl 0.9.1's own data path, on CPU.

What runs for real: ``kappa data prepare`` (the CLI) on a local file; verl's
``create_rl_dataset`` -> ``RLHFDataset`` (what the V1 trainer builds its data loaders
with) with the ``data.*`` config our command composes and the locally built tokenizer,
including its chat-template length filter (``filter_overlong_prompts``); verl's
``collate_fn``; the agent loop's prompt tokenisation (``create_continuous_token_builder``,
Qwen2 family, as ``SingleTurnAgentLoop`` builds prompt ids from ``raw_prompt``); and
verl's reward loop reading ``data_source``/``reward_model.ground_truth``/``extra_info``
from the dataset's own non-tensor fields.

What is replaced: generation (the responses are written here; vLLM/SGLang need a GPU) and
the Ray transport of the reward workers (see verl_cpu_support.reward_loop).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl")
pytest.importorskip("kappa_verl")

from kit.cli import run_kappa
from verl_cpu_support import batch_from, compose, reward_loop, tiny_cell

QUESTIONS = 6


def _prepare(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    """``kappa data prepare --dataset amc23 --source local``: six problems and one too long."""
    src = tmp_path / "amc.jsonl"
    rows = [{"id": i, "question": f"What is {i} + {i}?", "answer": float(2 * i)}
            for i in range(QUESTIONS)]
    rows.insert(3, {"id": 99, "question": "What is " + " plus ".join(["7"] * 300) + "?",
                    "answer": 2100.0})
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ran = run_kappa(capsys, "data", "prepare", "--dataset", "amc23", "--out",
                    str(tmp_path / "data"), "--source", "local", "--local-path", str(src))
    assert ran.code == 0, ran.output
    return tmp_path / "data" / "amc23" / "test.parquet"


def test_prepared_parquet_reaches_verl_dataset_chat_template_and_reward(
        tmp_path: Path, tiny_tokenizer_dir: Path, tiny_tokenizer: Any,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import datasets
    from verl.trainer.ppo.utils import create_rl_dataset
    from verl.utils.dataset.rl_dataset import collate_fn
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    parquet = _prepare(capsys, tmp_path)
    cell = tiny_cell(tiny_tokenizer_dir, tmp_path, train_files=str(parquet),
                     val_files=str(parquet), reward_correct=5.0, reward_incorrect=-1.0,
                     max_prompt_length=256)
    config = compose(cell, tmp_path / "run")
    assert list(config.data.train_files) == [str(parquet)]

    dataset = create_rl_dataset(config.data.train_files, config.data, tiny_tokenizer, None,
                                is_train=True)
    # verl's filter (chat template + our tokenizer) dropped the one prompt over 256 tokens.
    assert len(dataset) == QUESTIONS
    batch = collate_fn([dataset[i] for i in range(len(dataset))])

    assert batch["data_source"].tolist() == ["amc23"] * QUESTIONS
    assert [r["ground_truth"] for r in batch["reward_model"]] == [
        str(2 * i) for i in range(QUESTIONS)]
    # extra_info.index is the row's place in the prepared file (the long prompt was row 3).
    assert [e["index"] for e in batch["extra_info"]] == [0, 1, 2, 4, 5, 6]
    first = list(batch["raw_prompt"][0])
    assert first[0]["role"] == "user" and "What is 0 + 0?" in first[0]["content"]
    assert "Answer:" in first[0]["content"]  # the integer-answer instruction amc23 uses

    # The agent loop's prompt ids: our tokenizer's chat template around the dataset prompt.
    builder = create_continuous_token_builder(
        tiny_tokenizer, hf_model_type="qwen2",
        chat_template_kwargs=dict(config.data.get("apply_chat_template_kwargs") or {}))
    prompt_ids = [builder.build_initial_tokens(list(p)) for p in batch["raw_prompt"]]
    decoded = tiny_tokenizer.decode(prompt_ids[0])
    assert decoded == f"<|im_start|>user\n{first[0]['content']}<|im_end|>\n<|im_start|>assistant\n"
    assert max(map(len, prompt_ids)) <= config.data.max_prompt_length

    # The reward function reads what the dataset carried: right for even rows, wrong for odd.
    responses = [f"Answer: {2 * i if i % 2 == 0 else 2 * i + 1}" for i in range(QUESTIONS)]
    fields = ("data_source", "reward_model", "extra_info")
    data = batch_from(tiny_tokenizer, prompt_ids, responses,
                      {k: list(batch[k]) for k in fields})
    with reward_loop(config, workers=1) as manager:
        out = manager.compute_rm_score(data)
    assert out.non_tensor_batch["acc"].tolist() == [float(i % 2 == 0) for i in range(QUESTIONS)]
    assert out.batch["rm_scores"].sum(-1).tolist() == [
        5.0 if i % 2 == 0 else -1.0 for i in range(QUESTIONS)]
