"""Importing orchestrator.algorithms pulls in torch only, never the heavy services."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("mlflow", "ray", "sqlalchemy", "verl", "pandas", "alembic")


def test_import_does_not_load_services() -> None:
    code = (
        "import json, sys\n"
        "import orchestrator.algorithms\n"
        "import orchestrator.algorithms.table_render\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_cli_module_import_does_not_load_torch() -> None:
    code = (
        "import sys\n"
        "import orchestrator.cli.algorithms_cmd\n"
        "print('torch' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert proc.stdout.strip() == "False"


def test_public_api_is_curated() -> None:
    import orchestrator.algorithms as algorithms

    for name in algorithms.__all__:
        assert hasattr(algorithms, name), name
    for required in ("advantages", "aggregate", "policy_loss", "kl_penalty",
                     "entropy_from_logits", "masked_mean", "broadcast_to_tokens",
                     "advantage_table", "kappa_eff", "skewness_phi", "random_rewards"):
        assert required in algorithms.__all__
