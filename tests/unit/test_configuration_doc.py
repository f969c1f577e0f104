"""docs/configuration.md lists every ``KAPPA_*`` environment variable kappa reads, as the
table in ``orchestrator/configuration.py`` declares it, and the code reads them through it.

The code names a variable as a string constant of exactly its name (``"KAPPA_HOME"``,
``configuration.read("KAPPA_LEASE_SECONDS")``); scripts as ``${KAPPA_NAME:-default}``.
Every such name in ``orchestrator/``, the verl plug-in and ``scripts/`` must appear in the
page, every name in ``orchestrator/`` must be in the table (but those only the plug-in
reads), and every entry of the table must be on the page with its default and what it
allows, so neither list can fall behind the code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from orchestrator.configuration import VARIABLES

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
NAME = re.compile(r"KAPPA_[A-Z0-9_]*[A-Z0-9]")
SHELL_READ = re.compile(r"\$\{(KAPPA_[A-Z0-9_]+)")
#: Modules that may read a variable themselves: the table, and the job wrapper, which runs
#: on the standard library alone (``python -I -S``).
OWN_READERS = ("orchestrator/configuration.py", "orchestrator/executors/job_wrapper.py")


def names_in_python(source: str) -> set[str]:
    """String constants that are exactly a ``KAPPA_*`` name."""
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and NAME.fullmatch(node.value)}


def _read_names(*folders: str) -> dict[str, str]:
    """Every name read in ``folders`` (and ``scripts/``'s shell), with the first file."""
    found: dict[str, str] = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in names_in_python(path.read_text(encoding="utf-8")):
                found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def _shell_names() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted((ROOT / "scripts").glob("*.sh")):
        for name in SHELL_READ.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def _rows() -> dict[str, tuple[str, list[str]]]:
    """The page's rows of one variable each (``| `KAPPA_X` | ... |``), from "The
    variables" to the tests' own: name -> (its section's heading, its cells)."""
    rows: dict[str, tuple[str, list[str]]] = {}
    heading = ""
    text = DOC.read_text(encoding="utf-8")
    for line in text[text.index("## The variables"):].splitlines():
        if line.startswith("#"):
            heading = line.lstrip("# ").strip()
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if heading.startswith("For the tests"):  # their own variables, not kappa's
            break
        if line.startswith("|") and (match := re.fullmatch(r"`(KAPPA_[A-Z0-9_]+)`", cells[0])):
            rows[match.group(1)] = (heading, cells)
    return rows


def test_every_kappa_variable_the_code_reads_is_documented() -> None:
    read = _read_names("orchestrator", "plugins/kappa_verl") | _shell_names()
    assert {"KAPPA_HOME", "KAPPA_REGISTRY", "KAPPA_LEASE_SECONDS"} <= set(read), (
        f"the scan missed variables it should find: {sorted(read)}")
    documented = set(re.findall(r"`(_?KAPPA_[A-Z0-9_]+)`", DOC.read_text(encoding="utf-8")))
    missing = sorted(f"{name} (read in {where})" for name, where in read.items()
                     if name not in documented)
    assert not missing, (
        "docs/configuration.md does not list these variables (name, default, what it does, "
        "what it allows): " + ", ".join(missing))


def test_every_variable_of_orchestrator_is_in_the_table() -> None:
    plugin_only = set(_read_names("plugins/kappa_verl"))  # kappa sets them for the plug-in
    outside = sorted(f"{name} (in {where})" for name, where in _read_names("orchestrator").items()
                     if name not in VARIABLES and name not in plugin_only)
    assert not outside, ("declare these in orchestrator/configuration.py's VARIABLES and "
                         "read them with configuration.read: " + ", ".join(outside))


def test_the_page_shows_every_entry_of_the_table_as_declared() -> None:
    rows = _rows()
    wrong = []
    for name, variable in VARIABLES.items():
        if name not in rows:
            wrong.append(f"{name}: no row of its own")
            continue
        heading, cells = rows[name]
        if variable.set_by_kappa != heading.startswith("Set by kappa"):
            wrong.append(f"{name}: under {heading!r}")
        if not variable.set_by_kappa and cells[1] != variable.shown_default:
            wrong.append(f"{name}: default {cells[1]!r}, the table's is "
                         f"{variable.shown_default!r}")
        if cells[-1] != variable.allowed:
            wrong.append(f"{name}: allows {cells[-1]!r}, the table {variable.allowed!r}")
    plugin_only = set(_read_names("plugins/kappa_verl"))
    wrong += [f"{name}: on the page, not in the table" for name in rows
              if name not in VARIABLES and name not in plugin_only]
    assert not wrong, "docs/configuration.md and orchestrator/configuration.py disagree:\n" + (
        "\n".join(wrong))


def _direct_reads(source: str) -> list[str]:
    """``os.environ.get("KAPPA_X")``, ``os.getenv("KAPPA_X")``, ``environ["KAPPA_X"]``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        key: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args and (
                isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "getenv")):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and NAME.fullmatch(
                key.value):
            found.append(f"line {node.lineno}: {key.value}")
    return found


def test_variables_are_read_only_through_the_table() -> None:
    direct = [f"{path.relative_to(ROOT)} {where}"
              for path in sorted((ROOT / "orchestrator").rglob("*.py"))
              if str(path.relative_to(ROOT)) not in OWN_READERS
              for where in _direct_reads(path.read_text(encoding="utf-8"))]
    assert not direct, "read these through orchestrator.configuration.read: " + ", ".join(direct)


def test_the_scans_see_what_they_should() -> None:
    source = 'import os\nos.environ.get("KAPPA_NEW_KNOB", "1")\nMARK = "KAPPA_DOCTOR "\nx = f"{1}"'
    assert names_in_python(source) == {"KAPPA_NEW_KNOB"}
    assert _direct_reads(source + '\nos.environ["KAPPA_B"]\nos.getenv("KAPPA_C")\n'
                                  'os.environ["KAPPA_D"] = "1"') == [
        "line 2: KAPPA_NEW_KNOB", "line 5: KAPPA_B", "line 6: KAPPA_C"]
