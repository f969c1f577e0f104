"""``python interval_probe.py RUN_DIR CMD...``: run CMD, record when it ran in
``RUN_DIR/intervals.jsonl``, exit with its code. Standard library only."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    start = time.time()
    code = subprocess.call(sys.argv[2:])
    with open(Path(sys.argv[1]) / "intervals.jsonl", "a") as fh:
        fh.write(json.dumps({"start": start, "end": time.time()}) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
