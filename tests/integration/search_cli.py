"""``kappa`` with the search test backend registered: ``python search_cli.py search ...``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from orchestrator.backends import BACKENDS

BACKENDS["searchfake"] = "search_fixtures:SearchFakeBackend"

if __name__ == "__main__":
    sys.argv[0] = "kappa"
    from orchestrator.cli.app import main

    main()
