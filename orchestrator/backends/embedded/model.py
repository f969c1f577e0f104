"""A tiny causal transformer (pre-LayerNorm GPT) with a key/value cache for sampling. Sequences
are laid out ``[PAD.., BOS, prompt.., response.., PAD..]``; positions come from ``key_valid``
(False on padding), so a sequence's logits do not depend on its batch's padding."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from orchestrator.backends.embedded.tasks import EOS, PAD
from orchestrator.errors import Problem, UserInputError


@dataclass(frozen=True)
class ModelShape:
    """Everything needed to build the network."""

    vocab_size: int
    context_length: int
    d_model: int
    n_layers: int
    n_heads: int


KV = tuple[torch.Tensor, torch.Tensor]
KVCache = list[KV]


class _Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor, mask: torch.Tensor,
                past: KV | None) -> tuple[torch.Tensor, KV]:
        b, t, d = x.shape
        h = self.n_heads
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(d, dim=-1))
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        x = x + self.mlp(self.ln2(x))
        return x, (k, v)


class TinyGPT(nn.Module):
    """Token + learned position embeddings, ``n_layers`` pre-LN blocks, an LM head."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.shape = shape
        self.tok_emb = nn.Embedding(shape.vocab_size, shape.d_model)
        self.pos_emb = nn.Embedding(shape.context_length, shape.d_model)
        self.blocks = nn.ModuleList(
            _Block(shape.d_model, shape.n_heads) for _ in range(shape.n_layers))
        self.ln_f = nn.LayerNorm(shape.d_model)
        self.head = nn.Linear(shape.d_model, shape.vocab_size, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor, key_valid: torch.Tensor,
                past: KVCache | None = None) -> tuple[torch.Tensor, KVCache]:
        """Logits ``(B, T, V)`` for ``tokens`` ``(B, T)`` and the extended cache. ``key_valid``
        ``(B, T_past + T)`` marks real tokens among all keys (cached ones first); a token's
        position is the count of real tokens before it."""
        t_past = 0 if past is None else past[0][0].shape[2]
        positions = (key_valid.long().cumsum(dim=1) - 1).clamp(min=0)[:, t_past:]
        x = self.tok_emb(tokens) + self.pos_emb(positions)
        total = t_past + tokens.shape[1]
        query_index = torch.arange(t_past, total, device=tokens.device)[:, None]
        causal = torch.arange(total, device=tokens.device)[None, :] <= query_index
        # A padding query attends to itself only, so no attention row is empty (no NaN).
        own = torch.arange(total, device=tokens.device)[None, :] == query_index
        mask = ((causal[None] & key_valid[:, None, :]) | own[None])[:, None]  # over heads too
        new_cache: KVCache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, mask, None if past is None else past[i])
            new_cache.append(kv)
        return self.head(self.ln_f(x)), new_cache


def build_model(shape: ModelShape, seed: int) -> TinyGPT:
    """A freshly initialised model; the same seed gives the same weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyGPT(shape)


def frozen_copy(model: TinyGPT) -> TinyGPT:
    """A copy that takes no gradients and stays in eval mode: the KL loss's reference."""
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when present, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserInputError("device 'cuda' was asked for but this machine has no CUDA device", [
            Problem("device", "CUDA is not available here", found="'cuda'",
                    allowed="auto, cpu", fix="use device: auto (CUDA when present, else CPU)")])
    return torch.device(name)


@dataclass(frozen=True)
class Sequences:
    """One batch for a forward pass: ``tokens`` ``(B, P + R)``, left-padded prompts then
    right-padded responses; ``response_mask`` ``(B, R)`` is 1 on responses through EOS."""

    tokens: torch.Tensor
    key_valid: torch.Tensor
    prompt_width: int
    responses: torch.Tensor
    response_mask: torch.Tensor

    @property
    def response_lengths(self) -> torch.Tensor:
        """Tokens per response (EOS included)."""
        return self.response_mask.sum(dim=1)

    @staticmethod
    def joined(prompt_tokens: torch.Tensor, prompt_valid: torch.Tensor, responses: torch.Tensor,
               mask: torch.Tensor) -> Sequences:
        """Left-padded prompts followed by responses whose real tokens ``mask`` marks."""
        return Sequences(torch.cat([prompt_tokens, responses], dim=1),
                         torch.cat([prompt_valid, mask.bool()], dim=1), prompt_tokens.shape[1],
                         responses, mask.float())

    def select(self, rows: torch.Tensor) -> Sequences:
        """The sub-batch of the given row indices."""
        return Sequences(self.tokens[rows], self.key_valid[rows], self.prompt_width,
                         self.responses[rows], self.response_mask[rows])


def left_pad(prompts: Sequence[Sequence[int]],
             device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens, valid)`` of prompts padded on the left to a common width."""
    width = max(len(p) for p in prompts)
    tokens = torch.full((len(prompts), width), PAD, dtype=torch.long)
    for row, prompt in enumerate(prompts):
        tokens[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
    tokens = tokens.to(device)
    return tokens, tokens != PAD


@torch.no_grad()
def generate(model: TinyGPT, prompts: Sequence[Sequence[int]], max_new_tokens: int,
             temperature: float, generator: torch.Generator | None,
             greedy: bool = False) -> Sequences:
    """Sample one response per prompt (stops at EOS or after ``max_new_tokens``)."""
    device = next(model.parameters()).device
    prompt_tokens, prompt_valid = left_pad(prompts, device)
    batch = prompt_tokens.shape[0]
    logits, cache = model(prompt_tokens, prompt_valid)
    key_valid = prompt_valid
    out = torch.full((batch, max_new_tokens), PAD, dtype=torch.long, device=device)
    mask = torch.zeros((batch, max_new_tokens), dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    next_logits = logits[:, -1]
    for t in range(max_new_tokens):
        if greedy:
            token = next_logits.argmax(dim=-1)
        else:
            probs = torch.softmax(next_logits.float() / temperature, dim=-1)
            token = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        token = torch.where(done, torch.full_like(token, PAD), token)
        out[:, t] = token
        mask[:, t] = (~done).long()
        done = done | (token == EOS)
        if bool(done.all()) or t == max_new_tokens - 1:
            break
        # The new key is always marked valid: rows already done are ignored downstream.
        new_key = torch.ones((batch, 1), dtype=torch.bool, device=device)
        key_valid = torch.cat([key_valid, new_key], dim=1)
        step_logits, cache = model(token[:, None], key_valid, past=cache)
        next_logits = step_logits[:, -1]
    return Sequences.joined(prompt_tokens, prompt_valid, out, mask)


def response_logits(model: TinyGPT, seqs: Sequences, temperature: float) -> torch.Tensor:
    """Logits ``(B, R, V)`` that predict each response token, divided by ``temperature``."""
    logits, _ = model(seqs.tokens, seqs.key_valid)
    start = seqs.prompt_width - 1
    return logits[:, start:start + seqs.responses.shape[1]] / temperature


def token_log_probs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``log π(token)`` for each position, ``(B, R)``."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens[..., None]).squeeze(-1)


def pack(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
         device: torch.device) -> Sequences:
    """Prompts with given responses (teacher forcing), laid out like :func:`generate`'s output."""
    prompt_tokens, prompt_valid = left_pad(prompts, device)
    width = max(len(r) for r in responses)
    out = torch.full((len(responses), width), PAD, dtype=torch.long)
    mask = torch.zeros_like(out)
    for row, response in enumerate(responses):
        out[row, :len(response)] = torch.tensor(response, dtype=torch.long)
        mask[row, :len(response)] = 1
    return Sequences.joined(prompt_tokens, prompt_valid, out.to(device), mask.to(device))
