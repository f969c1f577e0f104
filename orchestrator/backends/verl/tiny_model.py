"""The smoke test's tiny Qwen2-shaped model and tokenizer (docs/verl.md#gpu-smoke-test), built
with no hub access, loaded by verl, vLLM and ``transformers`` like any Hugging Face checkpoint.
Deterministic: a folder whose ``kappa_tiny.json`` records the same arguments is reused, a new
one is built in a temporary sibling and renamed into place."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.runs.folder import read_json

MARKER = "kappa_tiny.json"
# Bump when what is built changes (so old folders are rebuilt, not reused).
FORMAT = 3

EOS = "<|im_end|>"
PAD = "<|endoftext|>"
IM_START = "<|im_start|>"
SPECIAL_TOKENS = (PAD, IM_START, EOS)
DEFAULT_VOCAB = 512
# Qwen2's template without its default system prompt: roles between <|im_start|> and
# <|im_end|>, and the assistant header when a generation prompt is asked for.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
# transformers.models.qwen2.tokenization_qwen2.PRETOKENIZE_REGEX
QWEN2_PRETOKENIZE = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
                     r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
_WORDS = ("what", "is", "the", "answer", "sum", "of", "and", "plus", "minus", "times",
          "compute", "let", "think", "step", "by", "so", "therefore", "Answer", "user",
          "assistant", "system", "boxed", "Please", "reason", "put", "your", "final",
          "within", "a", "number", "integer", "result", "equals")


def corpus(lines: int = 2000, seed: int = 0) -> list[str]:
    """The tokenizer's training text (arithmetic and chat role names), the same everywhere."""
    import random

    rng = random.Random(seed)
    text = []
    for _ in range(lines):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        op, value = rng.choice((("+", a + b), ("-", a - b), ("*", a * b)))
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9)))
        text.append(f"{words}: What is {a} {op} {b}? {words}. Answer: \\boxed{{{value}}}")
    return text


def _is_built(out_dir: Path, record: dict[str, Any]) -> bool:
    return read_json(out_dir / MARKER) == record


def _publish(build_dir: Path, out_dir: Path, record: dict[str, Any]) -> None:
    """Write the marker, then move ``build_dir`` to ``out_dir`` (replacing an older build).
    Racing builders: only the rename claims ``out_dir`` (it fails while that exists), so who
    finds it taken keeps a same-record build and moves only an older one aside, then retries."""
    (build_dir / MARKER).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    build_dir.chmod(0o755)  # mkdtemp's 0700 would hide it from other users of the cluster
    for _ in range(100):
        try:
            build_dir.rename(out_dir)
            return
        except OSError:  # out_dir exists (ENOTEMPTY/EEXIST), or is a file
            if not out_dir.exists():
                continue  # another builder moved its old one aside just now
        if _is_built(out_dir, record):  # another builder finished the same build first
            shutil.rmtree(build_dir)
            return
        stale = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
        with contextlib.suppress(FileNotFoundError):  # another builder moved it first
            out_dir.rename(stale / out_dir.name)
        shutil.rmtree(stale, ignore_errors=True)
    raise RuntimeError(f"could not publish {build_dir} as {out_dir}: it keeps changing")


def _build(out_dir: Path, record: dict[str, Any], fill: Callable[[Path], None]) -> Path:
    """``out_dir`` as ``fill`` makes it in a temporary sibling, unless ``record`` is built."""
    out_dir = Path(out_dir)
    if not _is_built(out_dir, record):
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
        fill(build)
        _publish(build, out_dir, record)
    return out_dir


def _save_tokenizer(target: Path, vocab_size: int, seed: int) -> None:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # Qwen2's own normaliser and pre-tokeniser: transformers 5 loads this folder as a
    # Qwen2Tokenizer (config.json says qwen2), which rebuilds them from its constants, so
    # any other choice would tokenise differently there than in PreTrainedTokenizerFast.
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(seed=seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, pad_token=PAD,
        additional_special_tokens=[IM_START], model_max_length=4096, padding_side="left")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(target))
    # Readable by transformers 4.x too (vLLM often pins it): the generic class name, the
    # template inline, <|im_start|> special in tokenizer.json already (4.x expects a dict
    # under transformers 5's "extra_special_tokens").
    config_path = target / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.pop("extra_special_tokens", None)
    config |= {"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": CHAT_TEMPLATE}
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def build_tokenizer(out_dir: Path, vocab_size: int = DEFAULT_VOCAB, seed: int = 0) -> Path:
    """A byte-level BPE tokenizer with a Qwen-style chat template in ``out_dir`` (reused if
    built). ``vocab_size`` counts the 256 bytes, the merges and the special tokens
    (``<|endoftext|>`` = pad, ``<|im_start|>``, ``<|im_end|>`` = eos)."""
    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size {vocab_size} is below the 256 bytes + special tokens")
    record = {"kind": "tokenizer", "format": FORMAT, "vocab_size": vocab_size, "seed": seed}
    return _build(out_dir, record, lambda build: _save_tokenizer(build, vocab_size, seed))


def build_tiny_model(out_dir: Path, vocab_size: int = DEFAULT_VOCAB, layers: int = 2,
                     hidden_size: int = 256, heads: int = 4, kv_heads: int = 2,
                     intermediate_size: int = 512, max_positions: int = 2048,
                     seed: int = 0) -> Path:
    """A random Qwen2 causal LM in bfloat16 (what vLLM loads) with :func:`build_tokenizer`'s
    tokenizer in ``out_dir`` (reused if built); by default head size 64, which every vLLM
    attention backend supports. Generation stops at ``<|im_end|>`` or ``<|endoftext|>``."""
    if hidden_size % heads or heads % kv_heads:
        raise ValueError("hidden_size must divide by heads, and heads by kv_heads")
    record = {"kind": "model", "format": FORMAT, "vocab_size": vocab_size, "layers": layers,
              "hidden_size": hidden_size, "heads": heads, "kv_heads": kv_heads,
              "intermediate_size": intermediate_size, "max_positions": max_positions,
              "seed": seed}

    def fill(build: Path) -> None:
        import torch
        from transformers import (
            GenerationConfig,
            PreTrainedTokenizerFast,
            Qwen2Config,
            Qwen2ForCausalLM,
        )
        from transformers.utils import logging as hf_logging

        _save_tokenizer(build, vocab_size, seed)
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(build))
        if len(tokenizer) > vocab_size:
            raise ValueError(f"the tokenizer has {len(tokenizer)} tokens, more than {vocab_size}")
        eos, pad = tokenizer.convert_tokens_to_ids([EOS, PAD])
        config = Qwen2Config(
            vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
            num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
            max_position_embeddings=max_positions, tie_word_embeddings=True,
            bos_token_id=None, eos_token_id=eos, pad_token_id=pad, use_cache=True)
        with torch.random.fork_rng(devices=[]):  # the caller's random stream is theirs
            torch.manual_seed(seed)
            model: Any = Qwen2ForCausalLM(config)
        model.to(torch.bfloat16)
        model.config.dtype = torch.bfloat16
        # Stop tokens only: vLLM takes a generation config's sampling fields as defaults,
        # and the sampling settings are verl's to give (temperature, response length).
        model.generation_config = GenerationConfig(eos_token_id=[eos, pad], pad_token_id=pad)
        bar = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a "Writing model shards" bar for one tiny file
        try:
            model.save_pretrained(str(build))
        finally:
            if bar:
                hf_logging.enable_progress_bar()

    return _build(out_dir, record, fill)
