"""``kappa`` (the fake backends registered) started on a signal, for concurrency tests.

``python kappa_at_go.py GO ID DELAY kappa-args...``: imports the whole CLI (and MLflow,
SQLAlchemy), touches ``GO.ID`` to say it is ready, waits until the file ``GO``
exists, sleeps ``DELAY`` seconds, then runs ``kappa kappa-args...``. Started together,
such processes hit the stores within milliseconds of each other.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the kit

# What a real kappa command would import on its way to the stores, imported before the
# start signal so that all processes reach the stores together.
import mlflow  # noqa: F401
import sqlalchemy  # noqa: F401
from kit import kappa_main

from orchestrator.cli import app  # noqa: F401


def main() -> None:
    """Wait for the go file, then run kappa."""
    go, ident, delay = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    Path(f"{go}.{ident}").write_text(str(os.getpid()))
    while not go.exists():
        time.sleep(0.002)
    time.sleep(delay)
    sys.argv = ["kappa", *sys.argv[4:]]
    kappa_main.main()


if __name__ == "__main__":
    main()
