"""A tiny causal transformer (pre-LayerNorm GPT) with a key/value cache for sampling.

Sequences are laid out left-padded: ``[PAD.., BOS, prompt.., response.., PAD..]``. Every
call takes ``key_valid`` (False on padding) and derives positions from it, so a sequence's
logits do not depend on how much padding its batch needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelShape:
    """Everything needed to build the network."""

    vocab_size: int
    context_length: int
    d_model: int
    n_layers: int
    n_heads: int


KVCache = list[tuple[torch.Tensor, torch.Tensor]]


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

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        b, t, d = x.shape
        h = self.n_heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
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

    def forward(
        self,
        tokens: torch.Tensor,
        key_valid: torch.Tensor,
        past: KVCache | None = None,
        positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, KVCache]:
        """Logits ``(B, T, V)`` for ``tokens`` ``(B, T)`` and the extended cache.

        ``key_valid`` ``(B, T_past + T)`` marks real tokens among all keys (cached ones
        first). ``positions`` default to the count of real tokens before each one.
        """
        t = tokens.shape[1]
        t_past = 0 if past is None else past[0][0].shape[2]
        if positions is None:
            positions = (key_valid.long().cumsum(dim=1) - 1).clamp(min=0)[:, t_past:]
        x = self.tok_emb(tokens) + self.pos_emb(positions)
        total = t_past + t
        query_index = torch.arange(t_past, total, device=tokens.device)[:, None]
        causal = torch.arange(total, device=tokens.device)[None, :] <= query_index
        # A padding query attends to itself only, so no attention row is empty (no NaN).
        own = torch.arange(total, device=tokens.device)[None, :] == query_index
        mask = (causal[None] & key_valid[:, None, :]) | own[None]
        mask = mask[:, None]  # broadcast over heads
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
