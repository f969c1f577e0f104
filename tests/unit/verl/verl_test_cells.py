"""Helpers of the verl backend tests: paper-sized cells, and the fake verl executable
(:mod:`kit.fake_verl`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.fake_verl import FAKE_VERL, write_fake_verl

from orchestrator.backends.verl.settings import VerlSettings

__all__ = ["BASELINES", "FAKE_VERL", "REWARD_FILE", "RUN_DIR", "cell", "write_fake_verl"]

BASELINES = ("grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov")
# A fixed reward-file path keeps golden files independent of where the plug-in lives.
REWARD_FILE = "/opt/kappa/plugins/kappa_verl/rewards.py"
RUN_DIR = Path("/runs/paper-table2/c0ffee")


def cell(**overrides: Any) -> VerlSettings:
    """A paper-sized cell (Qwen3-8B, Appendix B.2) with ``overrides`` applied."""
    base: dict[str, Any] = dict(
        model_path="Qwen/Qwen3-8B", train_files="/data/train.parquet",
        val_files="/data/val.parquet", reward_function_path=REWARD_FILE,
        tensor_parallel_size=2)
    return VerlSettings.model_validate(base | overrides)
