"""Fixtures of the verl backend tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from verl_test_cells import write_fake_verl


@pytest.fixture
def fake_verl(tmp_path: Path) -> Path:
    """An executable standing in for verl's ``python3`` (see verl_test_cells.FAKE_VERL)."""
    return write_fake_verl(tmp_path)
