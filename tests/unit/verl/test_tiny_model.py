"""The locally built tiny Qwen2 model and tokenizer (no hub access): round trips, a CPU
forward pass, determinism and reuse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.backends.verl.tiny_model import (
    EOS,
    IM_START,
    MARKER,
    PAD,
    build_tiny_model,
    build_tokenizer,
)

MESSAGES = [{"role": "user", "content": "What is 12 + 30? Answer: \\boxed{42}"}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_tokenizer_round_trip_and_chat_template(tiny: Path) -> None:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tok: Any = AutoTokenizer.from_pretrained(str(tiny))
    text = "Let me think step by step: 17 * 3 = 51, so the answer is 51.\nÄnswer ✓"
    assert tok.decode(tok(text)["input_ids"]) == text  # byte-level: any text round-trips
    assert (tok.eos_token, tok.pad_token) == (EOS, PAD)
    assert 256 < len(tok) <= 512
    prompt = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert prompt == ("<|im_start|>user\nWhat is 12 + 30? Answer: \\boxed{42}<|im_end|>\n"
                      "<|im_start|>assistant\n")
    ids = tok(prompt)["input_ids"]
    # The role markers are single special tokens, never split into bytes.
    assert ids.count(tok.convert_tokens_to_ids(IM_START)) == 2
    assert ids.count(tok.eos_token_id) == 1
    # transformers 5 loads the folder as a Qwen2Tokenizer (config.json says qwen2): it
    # must tokenise exactly as the saved tokenizer.json does.
    assert PreTrainedTokenizerFast.from_pretrained(str(tiny))(prompt)["input_ids"] == ids


def test_model_forward_and_generate_on_cpu(tiny: Path) -> None:
    import json

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok: Any = AutoTokenizer.from_pretrained(str(tiny))
    model: Any = AutoModelForCausalLM.from_pretrained(str(tiny), dtype=torch.float32)
    config = json.loads((tiny / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("qwen2", ["Qwen2ForCausalLM"])
    assert config["num_hidden_layers"] == 2 and config["vocab_size"] == 512
    generation = json.loads((tiny / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [tok.eos_token_id, tok.pad_token_id]
    ids = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, return_tensors="pt",
                                  return_dict=True)["input_ids"]
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], 512)
    assert torch.isfinite(logits).all() and logits.std() > 0
    out = model.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id)
    assert out.shape[1] > ids.shape[1]


def test_builds_are_deterministic_and_reused(tiny: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "model")
    files = sorted(p.name for p in tiny.iterdir())
    assert files == sorted(p.name for p in again.iterdir())
    for name in files:
        assert (tiny / name).read_bytes() == (again / name).read_bytes(), name
    # Same arguments: the folder is reused as it is (not rebuilt).
    stamp = (again / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_model(again) == again
    assert (again / "model.safetensors").stat().st_mtime_ns == stamp
    # Other arguments: rebuilt in place, the marker says which.
    build_tiny_model(again, layers=1)
    assert '"layers": 1' in (again / MARKER).read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers


def test_tokenizer_alone(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    folder = build_tokenizer(tmp_path / "tok", vocab_size=300)
    tok = AutoTokenizer.from_pretrained(str(folder))
    assert len(tok) <= 300 and tok.eos_token == EOS
    assert not (folder / "model.safetensors").exists()
    with pytest.raises(ValueError, match="vocab_size"):
        build_tokenizer(tmp_path / "small", vocab_size=100)
