"""orchestrator.algorithms loads torch only, and its bundles not even that.

That it imports nothing else of ``orchestrator`` is checked in tests/unit/test_architecture.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orchestrator.algorithms

FORBIDDEN = ("mlflow", "ray", "sqlalchemy", "verl", "pandas", "alembic")
PACKAGE = Path(orchestrator.algorithms.__file__).parent


def _loaded_after(imports: str, roots: tuple[str, ...]) -> list[str]:
    code = (
        "import json, sys\n"
        f"{imports}\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {roots!r})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_import_does_not_load_services() -> None:
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    imports = "\n".join(f"import orchestrator.algorithms.{m}" for m in modules)
    assert _loaded_after(imports, FORBIDDEN) == []


def test_bundles_load_without_torch() -> None:
    # Settings validation (`kappa validate`, `kappa plan`) reads the bundles: no torch.
    assert _loaded_after("import orchestrator.algorithms.bundles", ("torch",)) == []


def test_cli_module_import_does_not_load_torch() -> None:
    assert _loaded_after("import orchestrator.cli.algorithms_cmd", ("torch",)) == []
