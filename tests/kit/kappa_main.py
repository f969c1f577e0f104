"""``kappa`` as a process, with the kit's fake backends registered:
``python tests/kit/kappa_main.py submit ...`` (:data:`KAPPA_SCRIPT`; also what background
schedulers run, through ``KAPPA_CLI``)."""

from __future__ import annotations

import sys
from pathlib import Path

KAPPA_SCRIPT = Path(__file__).resolve()


def main() -> None:
    """Register the fake backends, then run ``kappa`` with ``sys.argv[1:]``."""
    from kit.fake_backend import ENTRIES
    from orchestrator.backends import BACKENDS
    from orchestrator.cli.app import main as kappa

    for name, entry in ENTRIES.items():
        BACKENDS[name] = entry
    sys.argv[0] = "kappa"
    kappa()


if __name__ == "__main__":
    sys.path.insert(0, str(KAPPA_SCRIPT.parents[1]))  # tests/: the kit is importable
    main()
