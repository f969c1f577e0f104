"""The rich console every command prints through: wide off a terminal (rich's 80 columns
would cut cell ids short in a log), unless ``COLUMNS`` says otherwise."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

LOG_WIDTH = 160


def make_console() -> Console:
    """A rich ``Console``; wide when writing to a log instead of a terminal."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = LOG_WIDTH
    return console
