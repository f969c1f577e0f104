"""Reading a run folder's log while it grows (``kappa logs CELL --follow``)."""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable
from pathlib import Path

# Seconds between looks at a followed log.
FOLLOW_PAUSE = 0.5


def stream_log(path: Path, write: Callable[[str], None],
               ended: Callable[[], bool] | None = None,
               pause: Callable[[], None] = lambda: time.sleep(FOLLOW_PAUSE)) -> bool:
    """Write the log at ``path``; with ``ended``, go on writing what is appended (a log
    that does not exist yet is waited for) until ``ended()`` is true, then what was
    appended before it was. Whether a log was there. A log that shrank was started anew
    (a rerun's fresh folder): it is read from its start. Bytes that are not UTF-8 are
    replaced, never an error, and a character split between two reads is kept whole."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offset, seen = 0, False
    while True:
        # Asked before reading, so whatever was written before the end is read after it.
        over = ended is None or ended()
        try:
            with open(path, "rb") as fh:
                if fh.seek(0, 2) < offset:
                    offset = 0
                fh.seek(offset)
                chunk = fh.read()
        except FileNotFoundError:
            chunk = None
        if chunk is not None:
            seen = True
            offset += len(chunk)
            if text := decoder.decode(chunk, final=over):
                write(text)
        if over:
            return seen
        pause()
