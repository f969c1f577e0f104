"""Fixtures of the verl-on-CPU tests: one tiny tokenizer for the session (built, not downloaded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


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
