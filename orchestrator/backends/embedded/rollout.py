"""Sampling responses with a key/value cache, and scoring them with a batched forward pass.

``generate`` decodes a whole batch one token at a time, reusing cached keys/values, so the
cost per new token is one position instead of the whole sequence. ``Sequences`` packs
prompts and responses into one left-padded tensor for the training forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from orchestrator.backends.embedded.model import TinyGPT
from orchestrator.backends.embedded.tokenizer import EOS, PAD


@dataclass(frozen=True)
class Sequences:
    """Prompts and responses of one batch, ready for a forward pass.

    ``tokens`` ``(B, P + R)`` = left-padded prompts then right-padded responses;
    ``response_mask`` ``(B, R)`` is 1 on response tokens up to and including EOS.
    """

    tokens: torch.Tensor
    key_valid: torch.Tensor
    prompt_width: int
    responses: torch.Tensor
    response_mask: torch.Tensor

    @property
    def response_lengths(self) -> torch.Tensor:
        """Tokens per response (EOS included)."""
        return self.response_mask.sum(dim=1)

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
def generate(
    model: TinyGPT,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    temperature: float,
    generator: torch.Generator | None,
    greedy: bool = False,
) -> Sequences:
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
    return Sequences(
        tokens=torch.cat([prompt_tokens, out], dim=1),
        key_valid=torch.cat([prompt_valid, mask.bool()], dim=1),
        prompt_width=prompt_tokens.shape[1],
        responses=out,
        response_mask=mask.float(),
    )


def response_logits(model: TinyGPT, seqs: Sequences, temperature: float) -> torch.Tensor:
    """Logits ``(B, R, V)`` that predict each response token, divided by ``temperature``."""
    logits, _ = model(seqs.tokens, seqs.key_valid)
    width = seqs.responses.shape[1]
    start = seqs.prompt_width - 1
    return logits[:, start:start + width] / temperature


def token_log_probs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``log π(token)`` for each position, ``(B, R)``."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens[..., None]).squeeze(-1)


def pack(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
         device: torch.device) -> Sequences:
    """Prompts with given responses (teacher forcing), laid out like :func:`generate`'s output."""
    prompt_tokens, prompt_valid = left_pad(prompts, device)
    width = max(len(r) for r in responses)
    out = torch.full((len(responses), width), PAD, dtype=torch.long)
    for row, response in enumerate(responses):
        out[row, :len(response)] = torch.tensor(response, dtype=torch.long)
    out = out.to(device)
    mask = torch.zeros_like(out)
    for row, response in enumerate(responses):
        mask[row, :len(response)] = 1
    return Sequences(
        tokens=torch.cat([prompt_tokens, out], dim=1),
        key_valid=torch.cat([prompt_valid, mask.bool()], dim=1),
        prompt_width=prompt_tokens.shape[1],
        responses=out,
        response_mask=mask.float(),
    )
