"""Embedded-trainer throughput: sampling with vs without the KV cache, optimizer steps/s,
and the wall time of one toy cell, side by side in one run (CPU, and CUDA when present).

    .venv/bin/python bench/trainer_throughput.py            # sampling + update + a 20-step cell
    .venv/bin/python bench/trainer_throughput.py --cell-steps 100   # the full toy cell

CPU time is reported next to wall time: on a shared machine the ratio says how much of the
wall time was spent waiting for a core.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from orchestrator.backends.embedded.model import Sequences, TinyGPT, generate, left_pad
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.tasks import EOS, PAD, TASKS, TOKENIZER
from orchestrator.backends.embedded.trainer import collect, ppo_update, train
from orchestrator.backends.embedded.warmstart import load_or_build


@torch.no_grad()
def generate_without_cache(model: TinyGPT, prompts: Sequence[Sequence[int]], max_new: int,
                           temperature: float, generator: torch.Generator) -> int:
    """The naive decoder (full forward pass per token), for comparison; tokens sampled."""
    device = next(model.parameters()).device
    tokens, valid = left_pad(prompts, device)
    done = torch.zeros(tokens.shape[0], dtype=torch.bool, device=device)
    sampled = 0
    for _ in range(max_new):
        logits, _ = model(tokens, valid)
        probs = torch.softmax(logits[:, -1] / temperature, dim=-1)
        token = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        token = torch.where(done, torch.full_like(token, PAD), token)
        sampled += int((~done).sum())
        done = done | (token == EOS)
        tokens = torch.cat([tokens, token[:, None]], dim=1)
        valid = torch.cat([valid, torch.ones_like(token[:, None], dtype=torch.bool)], dim=1)
        if bool(done.all()):
            break
    return sampled


def _timed(fn: Callable[[], object], repeats: int) -> tuple[float, float, object]:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result: object = None
    for _ in range(repeats):
        result = fn()
    return ((time.perf_counter() - wall0) / repeats, (time.process_time() - cpu0) / repeats,
            result)


def bench_device(device: str, cell_steps: int, repeats: int) -> list[tuple[str, str, str]]:
    """Rows ``(measure, value, note)`` for one device."""
    settings = EmbeddedSettings(device=device)
    dev = torch.device(device)
    task = TASKS[settings.task]
    policy = load_or_build(settings, dev).model
    prompts = [TOKENIZER.encode_prompt(p.prompt)
               for p in task.train_problems(0, settings.prompts_per_step)
               for _ in range(settings.group_size)]

    def cached() -> Sequences:
        gen = torch.Generator(device=dev).manual_seed(0)
        return generate(policy, prompts, settings.max_response_length, 1.0, gen)

    def uncached() -> int:
        gen = torch.Generator(device=dev).manual_seed(0)
        return generate_without_cache(policy, prompts, settings.max_response_length, 1.0, gen)

    wall_c, cpu_c, seqs = _timed(cached, repeats)
    tokens = int(seqs.response_mask.sum()) if isinstance(seqs, Sequences) else 0
    wall_u, cpu_u, tokens_u = _timed(uncached, repeats)
    rows = [
        ("sampled tokens/s (KV cache)", f"{tokens / wall_c:,.0f}",
         f"{len(prompts)} responses, cpu {tokens / max(cpu_c, 1e-9):,.0f}/s"),
        ("sampled tokens/s (no cache)", f"{int(tokens_u) / wall_u:,.0f}",  # type: ignore[call-overload]
         f"cache speed-up x{wall_u / wall_c:.2f} (cpu x{cpu_u / max(cpu_c, 1e-9):.2f})"),
    ]
    held = task.held_out_prompts(settings.val_size)
    exp = collect(settings, task, policy, None, 0, held)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=settings.learning_rate)
    wall_o, cpu_o, _ = _timed(lambda: ppo_update(settings, policy, optimizer, exp, 0), repeats)
    per_step = settings.ppo_mini_batches * settings.ppo_epochs
    rows.append(("optimizer steps/s", f"{per_step / wall_o:.1f}",
                 f"cpu {per_step / max(cpu_o, 1e-9):.1f}/s; {per_step} mini-batches of "
                 f"{exp.seqs.tokens.shape[0] // per_step} responses"))
    if cell_steps:
        cell = EmbeddedSettings(device=device, max_steps=cell_steps)
        with tempfile.TemporaryDirectory() as tmp:
            wall0, cpu0 = time.perf_counter(), time.process_time()
            train(cell, Path(tmp) / "run", progress=False)
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        rows.append((f"toy cell, {cell_steps} steps (warm start cached)", f"{wall:.1f} s",
                     f"cpu {cpu:.1f} s; G={cell.group_size}, {cell.prompts_per_step} prompts/step"
                     ", final eval included"))
    return rows


def main() -> None:
    """Print one table per available device."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell-steps", type=int, default=20, help="0 skips the toy cell")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '-')}")
    for device in devices:
        rows = bench_device(device, args.cell_steps, args.repeats)
        width = max(len(r[0]) for r in rows)
        print(f"\n[{device}]")
        for measure, value, note in rows:
            print(f"  {measure:<{width}}  {value:>10}   {note}")


if __name__ == "__main__":
    main()
