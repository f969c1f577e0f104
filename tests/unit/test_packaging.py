"""An installed kappa (a wheel, ``pip install .``) holds every file the package loads.

setuptools copies only ``.py`` files unless ``[tool.setuptools.package-data]`` in
``pyproject.toml`` names the others: a file it misses works from a checkout and is absent
from a wheel (the report's template, the registry's migration template, the toy's shipped
base model). So every file under ``orchestrator/`` that is not Python must match one of
those globs, under setuptools' reading of them.
"""

from __future__ import annotations

import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "orchestrator"
NOT_SHIPPED = {".py", ".pyc"}


def _package_data() -> dict[str, list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["setuptools"]["package-data"]


def _glob_matches(relative: str, pattern: str) -> bool:
    """setuptools' glob: relative to the package's folder, ``*`` within one path part."""
    parts, wanted = relative.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(map(fnmatchcase, parts, wanted))


def covered(path: Path, package_data: dict[str, list[str]]) -> bool:
    """Whether ``path`` (a file under orchestrator/) matches a package-data glob of one of
    the packages above it (every folder is a package: namespace packages are found too)."""
    folder = path.parent
    while folder == PACKAGE or PACKAGE in folder.parents:
        dotted = ".".join(folder.relative_to(ROOT).parts)
        relative = path.relative_to(folder).as_posix()
        patterns = [*package_data.get("*", []), *package_data.get(dotted, [])]
        if any(_glob_matches(relative, pattern) for pattern in patterns):
            return True
        folder = folder.parent
    return False


def test_package_data_covers_every_file_the_package_loads() -> None:
    package_data = _package_data()
    files = [p for p in PACKAGE.rglob("*")
             if p.is_file() and p.suffix not in NOT_SHIPPED and "__pycache__" not in p.parts]
    assert files, "no data files found under orchestrator/: the test looks in the wrong place"
    missing = sorted(str(p.relative_to(ROOT)) for p in files if not covered(p, package_data))
    assert not missing, (
        "these files under orchestrator/ would be missing from a wheel; add a glob for them "
        "to [tool.setuptools.package-data] in pyproject.toml:\n" + "\n".join(missing))


def test_the_shipped_base_model_and_report_template_are_among_them() -> None:
    """The files an installed kappa needs for the demo are really there to be covered."""
    names = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*") if p.is_file()}
    assert "backends/embedded/base_models/manifest.json" in names
    assert any(n.startswith("backends/embedded/base_models/") and n.endswith(".pt") for n in names)
    assert "analysis/templates/report.html.j2" in names


def test_the_glob_reading_fails_a_file_no_glob_names() -> None:
    package_data = {"*": ["*.html"], "orchestrator.backends.embedded": ["base_models/*.pt"]}
    assert covered(PACKAGE / "backends/embedded/base_models/x.pt", package_data)
    assert covered(PACKAGE / "analysis/templates/a.html", package_data)
    assert not covered(PACKAGE / "backends/embedded/base_models/manifest.json", package_data)
    assert not covered(PACKAGE / "backends/embedded/base_models/deeper/x.pt", package_data)
