"""Docs and code cite only what the repository holds.

Every relative link in ``README.md``, ``plugins/README.md`` and ``docs/*.md`` resolves (its
``#anchor`` too), every backticked repository path in them exists, every ``docs/….md``
cited from code, specs, scripts or tests exists with its anchor, and nothing names the
project's design notes or paper files kept outside the repository (a reader of the
repository does not have them: what they say belongs in ``docs/``).
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
THIS = Path(__file__).resolve()

# Folders and files whose text may cite documents; generated and vendored ones are left out.
SCANNED = ("orchestrator", "plugins", "tests", "bench", "scripts", "docs", "experiments",
           "dashboards", "README.md", "Makefile", "pyproject.toml")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".html", ".j2", ".txt",
                 ".cfg", ".ini", ".json", ""}
SKIP_PARTS = {"__pycache__", ".venv", ".git", "node_modules"}
MARKDOWN = ("README.md", "plugins/README.md", "docs/*.md")
TOP_LEVEL = ("orchestrator", "plugins", "tests", "bench", "docs", "experiments",
             "dashboards", "scripts")

# Names of the notes and paper files outside the repository (split so this file does not
# match itself).
EXTERNAL = re.compile("|".join((
    r"\bALGORITHMS" r"\.md", r"\bARCHITECTURE" r"\.md", r"\bVERL_" r"NOTES",
    r"\bseeds" r"/", r"\.\./shared" r"\b", r"/work" r"/shared", r"\b00[03]_[0-9a-f]{16}\.txt",
)))
DOC_CITATION = re.compile(r"(?<![\w/.])docs/([\w.-]+\.md)(#[\w-]+)?")
MD_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
BACKTICKED = re.compile(r"`([^`\s]+)`")
FENCE = re.compile(r"^\s*(```|~~~)")
PLACEHOLDER = re.compile(r"[<>*{}$…\[\]]|\.\.\.")


def _scanned_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [p for p in sorted(path.rglob("*"))
                      if p.is_file() and p.suffix in TEXT_SUFFIXES
                      and not SKIP_PARTS & set(p.relative_to(ROOT).parts)]
    return [f for f in files if f.resolve() != THIS]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return ""


def _markdown_files() -> list[Path]:
    return sorted({p for pattern in MARKDOWN for p in ROOT.glob(pattern)})


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of a Markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor a Markdown file offers: its headings' slugs (with GitHub's -1, -2 for
    repeats) and explicit ``id=``/``name=`` attributes."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in _prose_lines(_read(path)):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(re.findall(r"""(?:id|name)=["']([^"']+)["']""", line))
    return frozenset(found)


@cache
def _package_dirs() -> frozenset[str]:
    """Folders directly under orchestrator/ and plugins/ (docs name modules from there)."""
    return frozenset(p.name for base in ("orchestrator", "plugins")
                     for p in (ROOT / base).iterdir() if p.is_dir() and p.name != "__pycache__")


def _where(path: Path, number: int) -> str:
    return f"{path.relative_to(ROOT)}:{number}"


def test_nothing_names_the_notes_outside_the_repository() -> None:
    hits = [f"{_where(path, n)}: {line.strip()}"
            for path in _scanned_files()
            for n, line in enumerate(_read(path).splitlines(), 1) if EXTERNAL.search(line)]
    assert not hits, (
        "these lines cite documents that are not in the repository; write what they need "
        "into docs/ and cite that, or drop the citation:\n" + "\n".join(hits))


def test_docs_cited_from_code_exist_with_their_anchors() -> None:
    bad = []
    for path in _scanned_files():
        for n, line in enumerate(_read(path).splitlines(), 1):
            for match in DOC_CITATION.finditer(line):
                target = ROOT / "docs" / match.group(1)
                anchor = (match.group(2) or "#")[1:]
                if not target.is_file():
                    bad.append(f"{_where(path, n)}: docs/{match.group(1)} does not exist")
                elif anchor and anchor not in anchors(target):
                    bad.append(f"{_where(path, n)}: no #{anchor} in docs/{match.group(1)}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    bad = []
    for n, line in _prose_lines(_read(doc)):
        for target in MD_LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                continue
            file_part, _, anchor = target.partition("#")
            dest = (doc.parent / file_part).resolve() if file_part else doc
            if not dest.exists():
                bad.append(f"{_where(doc, n)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{_where(doc, n)}: {target} (no such heading)")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_backticked_repository_paths_exist(doc: Path) -> None:
    bad = []
    for n, line in _prose_lines(_read(doc)):
        for token in BACKTICKED.findall(line):
            path = re.split(r"::|:(?=[A-Za-z_])", token)[0].rstrip(".,;")
            if "/" not in path or PLACEHOLDER.search(path):
                continue
            if path.split("/")[0] in TOP_LEVEL:
                candidates = [ROOT / path]
            elif path.endswith(".py") and path.split("/")[0] in _package_dirs():
                # `scheduler/loop.py`: a module named from inside orchestrator/ or plugins/.
                candidates = [ROOT / "orchestrator" / path, ROOT / "plugins" / path]
            else:
                continue
            if not any(c.exists() for c in candidates):
                bad.append(f"{_where(doc, n)}: `{token}`")
    assert not bad, "these paths are not in the repository:\n" + "\n".join(bad)


# --- docs/architecture.md: every arrow of the map is an import in the code -----------------

ARROW = re.compile(r"^\s*`?([a-z_]+)`?\s+->\s+(.+?)\s*$")


def _unit_of(path: Path, base: Path) -> str:
    """The map's name for a source file: its top package (or module) under ``base``."""
    return path.relative_to(base).parts[0].removesuffix(".py")


def _imported(tree: ast.AST, package: list[str]) -> set[str]:
    """Every ``orchestrator.<unit>`` a module imports, at any depth (function-level too)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join([*package[: len(package) - node.level + 1], module]).strip(".")
            names = [module] + ([f"{module}.{a.name}" for a in node.names]
                                if module == "orchestrator" else [])
        found.update(n.split(".")[1] for n in names if n.startswith("orchestrator."))
    return found


@cache
def import_edges() -> dict[str, frozenset[str]]:
    """``unit -> units it imports`` over orchestrator/ (and the plug-in, as ``kappa_verl``)."""
    edges: dict[str, set[str]] = {}
    for base in (ROOT / "orchestrator", ROOT / "plugins"):
        for path in base.rglob("*.py"):
            if "migrations" in path.parts:
                continue
            unit = _unit_of(path, base)
            prefix = ["orchestrator"] if base.name == "orchestrator" else []
            package = [*prefix, *path.relative_to(base).parts[:-1]]
            tree = ast.parse(path.read_text(encoding="utf-8"))
            edges.setdefault(unit, set()).update(_imported(tree, package) - {unit})
    return {unit: frozenset(targets) for unit, targets in edges.items()}


def test_every_arrow_of_the_internals_map_is_an_import() -> None:
    doc = ROOT / "docs" / "architecture.md"
    edges = import_edges()
    arrows, bad = 0, []
    for n, line in enumerate(_read(doc).splitlines(), 1):
        match = ARROW.match(line)
        if not match:
            continue
        source = match.group(1)
        for target in re.split(r"[,\s]+", match.group(2).replace("`", "").strip()):
            arrows += 1
            if target not in edges.get(source, frozenset()):
                bad.append(f"docs/architecture.md:{n}: {source} -> {target} (no such import)")
    assert arrows, "docs/architecture.md has no `A -> B` arrows to check"
    assert not bad, "\n".join(bad)


def test_the_internals_map_lists_every_import_between_packages_ground_up() -> None:
    """The map is complete (no import between packages left out) and ordered: each unit
    imports only units listed above it, so the packages form no cycle."""
    listed: list[str] = []
    drawn: dict[str, set[str]] = {}
    for line in _read(ROOT / "docs" / "architecture.md").splitlines():
        unit = re.match(r"^(\w+)\s+(->|\(imports no other package\))", line)
        if not unit:
            continue
        listed.append(unit.group(1))
        arrow = ARROW.match(line)
        drawn[unit.group(1)] = set(re.split(r"[,\s]+", arrow.group(2).replace("`", "").strip())
                                   ) if arrow else set()
    edges = {u: t - {"__init__", "__main__"} for u, t in import_edges().items()
             if u not in ("__init__", "__main__")}
    missing = {u: sorted(t - drawn.get(u, set())) for u, t in edges.items()
               if t - drawn.get(u, set())}
    assert not missing, f"imports the map leaves out: {missing}"
    upward = {u: sorted(t for t in drawn[u] if listed.index(t) >= listed.index(u))
              for u in listed if any(listed.index(t) >= listed.index(u) for t in drawn[u])}
    assert not upward, f"a unit imports one listed below it (a cycle between packages): {upward}"
