"""docs/configuration.md lists every ``KAPPA_*`` environment variable kappa reads.

The code names a variable as a string constant of exactly its name (``"KAPPA_HOME"``,
``os.environ.get("KAPPA_LEASE_SECONDS")``); scripts as ``${KAPPA_NAME:-default}``. Every
such name in ``orchestrator/``, the verl plug-in and ``scripts/`` must appear in the page,
so the list cannot fall behind the code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
NAME = re.compile(r"KAPPA_[A-Z0-9_]*[A-Z0-9]")
SHELL_READ = re.compile(r"\$\{(KAPPA_[A-Z0-9_]+)")


def names_in_python(source: str) -> set[str]:
    """String constants that are exactly a ``KAPPA_*`` name."""
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and NAME.fullmatch(node.value)}


def _read_names() -> dict[str, str]:
    """Every name read, with the first file that reads it."""
    found: dict[str, str] = {}
    for folder in (ROOT / "orchestrator", ROOT / "plugins" / "kappa_verl"):
        for path in sorted(folder.rglob("*.py")):
            for name in names_in_python(path.read_text(encoding="utf-8")):
                found.setdefault(name, str(path.relative_to(ROOT)))
    for path in sorted((ROOT / "scripts").glob("*.sh")):
        for name in SHELL_READ.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_every_kappa_variable_the_code_reads_is_documented() -> None:
    read = _read_names()
    assert {"KAPPA_HOME", "KAPPA_REGISTRY", "KAPPA_LEASE_SECONDS"} <= set(read), (
        f"the scan missed variables it should find: {sorted(read)}")
    documented = set(re.findall(r"`(_?KAPPA_[A-Z0-9_]+)`", DOC.read_text(encoding="utf-8")))
    missing = sorted(f"{name} (read in {where})" for name, where in read.items()
                     if name not in documented)
    assert not missing, (
        "docs/configuration.md does not list these variables (name, default, what it does, "
        "which option wins): " + ", ".join(missing))


def test_the_scan_sees_a_name_only_as_a_whole_constant() -> None:
    source = 'import os\nos.environ.get("KAPPA_NEW_KNOB", "1")\nMARK = "KAPPA_DOCTOR "\nx = f"{1}"'
    assert names_in_python(source) == {"KAPPA_NEW_KNOB"}
