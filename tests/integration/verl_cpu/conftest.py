"""Fixtures of the verl-on-CPU tests: tiny tokenizer and model (built here), composed cells."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from verl_cpu_support import CELLS, compose, tiny_cell

# Session scope: under pytest-xdist a module's tests may interleave with other modules',
# and module fixtures would then be rebuilt (verl's Hydra compose is ~0.5 s a cell).


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kappa's locally trained byte-level BPE with a chat template (tiny_model.build_tokenizer)."""
    pytest.importorskip("tokenizers")
    from orchestrator.backends.verl.tiny_model import build_tokenizer

    return build_tokenizer(tmp_path_factory.mktemp("verl_cpu") / "tokenizer")


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_tokenizer_dir: Path) -> Any:
    """The tokenizer loaded the way verl's workers load it (``verl.utils.hf_tokenizer``)."""
    from verl.utils import hf_tokenizer

    return hf_tokenizer(str(tiny_tokenizer_dir), trust_remote_code=True)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kappa's tiny Qwen2 (2 layers, vocabulary 512) with its tokenizer (build_tiny_model)."""
    pytest.importorskip("transformers")
    from orchestrator.backends.verl.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("verl_cpu_model") / "model")


@pytest.fixture(scope="session")
def cell_configs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], Any]:
    """verl's composed config of each (baseline, reward_budget) cell of the tiny model."""
    pytest.importorskip("verl")
    folder = tmp_path_factory.mktemp("verl_cpu_cells")
    return {(b, rb): compose(tiny_cell(folder / "model", folder, baseline=b, reward_budget=rb),
                             folder / f"{b}-{rb}")
            for b, rb in CELLS}
