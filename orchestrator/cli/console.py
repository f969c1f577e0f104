"""The rich console every command prints through.

On a terminal rich uses the window's width. Anywhere else (a CI log, a pipe, ``tee``) it
would fall back to 80 columns and cut cell ids and axis values short, so a log gets a wide
console instead; ``COLUMNS`` still wins when set.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

LOG_WIDTH = 160


def make_console(**options: Any) -> Console:
    """A rich ``Console``; wide when writing to a log instead of a terminal."""
    from rich.console import Console

    console = Console(**options)
    if not console.is_terminal and "COLUMNS" not in os.environ and "width" not in options:
        console.width = LOG_WIDTH
    return console
