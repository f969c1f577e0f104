"""The shape of the package, checked: what docs/internals.md promises a newcomer.

Every rule here reads the source (AST), so it holds for imports inside functions too:
- no import cycles between modules of ``orchestrator``;
- no module over 400 lines;
- ``orchestrator.algorithms`` imports nothing else from ``orchestrator``;
- one atomic write (``os.replace`` appears only in the run-folder package);
- process liveness through psutil, never by reading ``/proc/<pid>``;
- no spec parsing where the stored plan is what must be read.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "orchestrator"
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _imported_names(name: str, path: Path) -> Iterator[str]:
    """Every module name an import statement in ``path`` names (at any depth)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join([*here, base] if base else here)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _owner(dotted: str) -> str | None:
    """The module of ``orchestrator`` that ``dotted`` names (a module or a name in one)."""
    while dotted:
        if dotted in MODULES:
            return dotted
        dotted = dotted.rpartition(".")[0]
    return None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        targets = {_owner(imported) for imported in _imported_names(name, path)}
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "modules that import each other (directly or around a loop):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_at_most_400_lines(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name]} has {lines} lines: split it along a seam"


def test_algorithms_import_nothing_else_from_orchestrator() -> None:
    graph = _graph()
    outside = {
        name: sorted(t for t in targets if not t.startswith("orchestrator.algorithms"))
        for name, targets in graph.items()
        if name.startswith("orchestrator.algorithms")
    }
    assert not {k: v for k, v in outside.items() if v}


def _sources() -> Iterator[tuple[str, str]]:
    for name, path in MODULES.items():
        yield name, path.read_text(encoding="utf-8")


def test_one_atomic_write() -> None:
    writers = sorted(name for name, text in _sources()
                     if "os.replace(" in text and not name.startswith("orchestrator.runs"))
    assert not writers, f"write through orchestrator.runs' atomic write instead: {writers}"


def test_liveness_through_psutil() -> None:
    readers = sorted(name for name, text in _sources() if '"/proc/{' in text or "'/proc/{" in text
                     or 'f"/proc/' in text)
    assert not readers, f"ask psutil instead of reading /proc/<pid>: {readers}"


PLAN_READERS = ("orchestrator.scheduler", "orchestrator.analysis", "orchestrator.stopping",
                "orchestrator.search")
SPEC_PARSERS = ("parse_spec", "load_spec", "load_yaml", "yaml.safe_load", "stored_stopping",
                "stored_search")


def test_no_spec_parsing_where_the_plan_is_read() -> None:
    parsing = sorted(
        f"{name}: {parser}" for name, text in _sources() for parser in SPEC_PARSERS
        if name.startswith(PLAN_READERS) and parser in text)
    assert not parsing, f"read the sweep's stored plan instead of its spec: {parsing}"
