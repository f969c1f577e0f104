"""The embedded RL trainer, top to bottom: warm start, then RL steps, then final evaluation.

``train(settings, out_dir)`` runs one cell in ``out_dir``. Re-running it in the same folder
resumes from the newest checkpoint and ends with the same metrics as an uninterrupted run:
all randomness of step ``s`` (prompts, sampling, mini-batch order, Clip-Cov's draw) comes
from generators seeded by ``(seed, s)``, so the step counter saved in the checkpoint is
the sampling RNG state; the global torch/python RNG states are saved as well.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from orchestrator.backends.embedded.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from orchestrator.backends.embedded.evaluation import benchmark_scores, greedy_accuracy
from orchestrator.backends.embedded.experience import NothingKept, collect
from orchestrator.backends.embedded.metrics import RunFiles
from orchestrator.backends.embedded.model import TinyGPT
from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.embedded.tasks import TASKS, stable_seed
from orchestrator.backends.embedded.update import kappa_eff, ppo_update
from orchestrator.backends.embedded.warmstart import load_or_build
from orchestrator.backends.stop_request import StopRequest, read_stop_request
from orchestrator.errors import Problem, UserInputError


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when present, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserInputError("device 'cuda' was asked for but this machine has no CUDA device", [
            Problem("device", "CUDA is not available here", found="'cuda'",
                    allowed="auto, cpu", fix="use device: auto (CUDA when present, else CPU)")])
    return torch.device(name)


@contextmanager
def _progress(total: int, done: int, enabled: bool) -> Iterator[Callable[[dict[str, float]], None]]:
    """A rich progress bar on a terminal (nothing when output is redirected); yields advance()."""
    if not enabled:
        yield lambda metrics: None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task_id = bar.add_task("RL steps", total=total, completed=done)

        def advance(metrics: dict[str, float]) -> None:
            score = metrics.get("critic/score/mean", float("nan"))
            bar.update(task_id, advance=1, description=f"RL steps  score {score:.3f}")

        yield advance


def _frozen_copy(model: TinyGPT) -> TinyGPT:
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def train(settings: EmbeddedSettings, out_dir: Path,
          progress: bool | None = None) -> dict[str, float]:
    """Run one cell to completion in ``out_dir`` (resuming if it was started); final metrics."""
    out_dir.mkdir(parents=True, exist_ok=True)
    device = resolve_device(settings.device)
    task = TASKS[settings.task]
    algo = settings.algorithm
    files = RunFiles(out_dir, settings.max_steps)
    (out_dir / "summary.json").unlink(missing_ok=True)

    t0 = time.perf_counter()
    warm = load_or_build(settings, device)
    warm_seconds = time.perf_counter() - t0
    policy = warm.model
    ref = _frozen_copy(policy) if algo.use_kl_loss else None
    optimizer = torch.optim.AdamW(policy.parameters(), lr=settings.learning_rate,
                                  weight_decay=0.0)
    held_out = task.held_out_prompts(settings.val_size)
    val_problems = task.benchmark(task.val_benchmark, settings.val_size)
    val_key = f"val-core/{task.val_benchmark}/acc/mean@1"

    start = 0
    ckpt = latest_checkpoint(out_dir)
    if ckpt is not None:
        state = load_checkpoint(ckpt, device)
        policy.load_state_dict(state.model)
        optimizer.load_state_dict(state.optimizer)
        restore_rng(state)
        start = state.step
    files.resume_from(start if ckpt is not None else -1)
    if start == 0:
        acc = greedy_accuracy(policy, task, val_problems, settings.max_response_length)
        files.log(0, {val_key: acc, "warm_start/val_acc": acc,
                      "warm_start/steps": warm.steps,
                      "warm_start/probe_acc": warm.probe_accuracy,
                      "timing_s/warm_start": warm_seconds})

    show = sys.stdout.isatty() if progress is None else progress
    last = start
    saved = start if ckpt is not None else -1  # the step of the newest checkpoint
    stop: StopRequest | None = None
    with _progress(settings.max_steps, start, show) as advance:
        for step in range(start, settings.max_steps):
            # A stop request (a stopping rule fired) ends the run at this step boundary.
            stop = read_stop_request(out_dir)
            if stop is not None:
                break
            metrics = rl_step(settings, policy, ref, optimizer, step, held_out)
            done = last = step + 1
            if done % settings.val_every == 0 or done == settings.max_steps:
                metrics[val_key] = greedy_accuracy(policy, task, val_problems,
                                                   settings.max_response_length)
            files.log(done, metrics)
            files.progress(done)
            if done % settings.checkpoint_every == 0 or done == settings.max_steps:
                save_checkpoint(out_dir, done, policy, optimizer)
                saved = done
            advance(metrics)
    if stop is not None:
        print(f"[kappa] stopped at step {last}: {stop.reason}", flush=True)
        if saved != last:
            save_checkpoint(out_dir, last, policy, optimizer)  # a stopped run ends saved
        files.progress(last)

    final_eval = evaluate(settings, policy)
    files.log(last, final_eval)
    final = _latest_values(files.metrics_path)
    # MLflow gets a bounded wait; what it has not taken yet waits in the run folder's
    # outbox for the scheduler, which delivers it before ending the run.
    files.close()
    files.summary(last, final, stopped=stop)
    return final


def rl_step(settings: EmbeddedSettings, policy: TinyGPT, ref: TinyGPT | None,
            optimizer: torch.optim.Optimizer, step: int,
            held_out: frozenset[str]) -> dict[str, float]:
    """Collect one batch of experience and update the policy on it; the step's metrics."""
    torch.manual_seed(stable_seed("step", settings.seed, step))
    task = TASKS[settings.task]
    t_start = time.perf_counter()
    try:
        exp = collect(settings, task, policy, ref, step, held_out)
    except NothingKept as empty:
        seconds = time.perf_counter() - t_start
        return {"batch/num_gen_batches": empty.attempts, "batch/kept_groups": 0.0,
                "timing_s/step": seconds, "perf/throughput": empty.sampled_tokens / seconds}
    t_gen = time.perf_counter()
    update = ppo_update(settings, policy, optimizer, exp, step)
    t_update = time.perf_counter()
    sharpening = kappa_eff(settings, policy, exp)
    seconds = time.perf_counter() - t_start
    mask = exp.seqs.response_mask
    lengths = exp.seqs.response_lengths
    token_adv = exp.advantages[mask.bool()]
    metrics = {
        **update,
        "actor/entropy": float((exp.entropy * mask).sum() / mask.sum()),
        "critic/score/mean": float(exp.rewards.mean()),
        "critic/score/max": float(exp.rewards.max()),
        "critic/score/min": float(exp.rewards.min()),
        "critic/acc/mean": float(exp.correct.float().mean()),
        "critic/advantages/mean": float(token_adv.mean()),
        "critic/advantages/max": float(token_adv.max()),
        "critic/advantages/min": float(token_adv.min()),
        "response_length/mean": float(lengths.mean()),
        "response_length/clip_ratio": float(
            (lengths >= settings.max_response_length).float().mean()),
        "batch/num_gen_batches": float(exp.attempts),
        "batch/kept_groups": float(exp.groups),
        "timing_s/gen": t_gen - t_start,
        "timing_s/update": t_update - t_gen,
        "timing_s/step": seconds,
        "perf/throughput": exp.sampled_tokens / seconds,
    }
    if sharpening is not None:
        metrics["actor/kappa_eff"] = sharpening
    return metrics


def evaluate(settings: EmbeddedSettings, policy: TinyGPT) -> dict[str, float]:
    """Final scores on every benchmark: greedy accuracy, mean@k and pass@k.

    Only the in-distribution validation set is reported under ``val-core/`` (as during
    training), so "the validation accuracy" of a run is one unambiguous metric; held-out
    benchmarks are ``eval/<benchmark>/...``.
    """
    task = TASKS[settings.task]
    device = next(policy.parameters()).device
    scores: dict[str, float] = {}
    for benchmark in settings.benchmarks or task.benchmarks:
        generator = torch.Generator(device=device)
        generator.manual_seed(stable_seed("eval", settings.seed, benchmark))
        problems = task.benchmark(benchmark, settings.val_size)
        scores.update(benchmark_scores(policy, task, benchmark, problems, settings.eval_samples,
                                       settings.max_response_length, settings.eval_temperature,
                                       generator))
        if benchmark == task.val_benchmark:
            scores[f"val-core/{benchmark}/acc/mean@1"] = scores[f"eval/{benchmark}/greedy@1"]
    return scores


def _latest_values(metrics_path: Path) -> dict[str, float]:
    """The last logged value of every metric in ``metrics.jsonl``."""
    latest: dict[str, float] = {}
    for line in metrics_path.read_text().splitlines():
        latest.update(json.loads(line)["metrics"])
    return latest
