"""Where kappa keeps its state by default: a project-local ``.kappa/`` folder, moved by
``KAPPA_HOME`` (made absolute by every command: :func:`absolute_home`); ``KAPPA_REGISTRY``
/ ``--registry`` and ``KAPPA_MLFLOW_URI`` / ``--mlflow`` select other stores. Sweep names
become folder and file names under it: :func:`check_name` makes sure one can only name one
entry inside its folder. ``<name>.canary`` holds the canary runs of sweep ``<name>``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from orchestrator import configuration
from orchestrator.errors import Problem, UserInputError

MAX_NAME = 200
CANARY_SUFFIX = ".canary"
HOME_ENV = "KAPPA_HOME"
CACHE_ENV = "KAPPA_CACHE"


def check_name(name: str, what: str = "sweep") -> str:
    """``name`` itself if it is safe as one file or folder name, else UserInputError. Refused:
    empty, ``.``/``..``, a path separator, NUL or another control character, more than
    :data:`MAX_NAME` characters: anything that could point outside the folder the name is joined to
    (``kappa export ../../etc``); and bytes that are not UTF-8 (a command line's ``$'\\xff'``
    arrives as a lone surrogate, which no database, file name or terminal output can encode)."""
    if (not name or name in (".", "..") or len(name) > MAX_NAME or "/" in name or "\\" in name
            or configuration.NOT_TEXT.search(name)):
        raise UserInputError(f"invalid {what} name {name!r}", [Problem(
            what, f"not a valid {what} name", found=repr(name),
            allowed=f"one name of at most {MAX_NAME} characters of UTF-8 text: no '/', "
                    "'\\', control characters, and not '.' or '..'",
            fix="`kappa status` lists the sweeps")])
    return name


def canary_sweep(name: str) -> str:
    """The name of the sweep that holds the canary runs of sweep ``name``."""
    return name + CANARY_SUFFIX


def is_canary_sweep(name: str) -> bool:
    """Whether ``name`` is a canary sweep (its runs are tagged ``kappa.canary``)."""
    return name.endswith(CANARY_SUFFIX)


#: Endings of the sweeps kappa names itself, never a spec's name (what each holds).
RESERVED_SUFFIXES = {CANARY_SUFFIX: "canary runs"}


def reserved_suffix(name: str) -> str | None:
    """The ending of ``name`` that is kappa's own (:data:`RESERVED_SUFFIXES`), if any."""
    return next((s for s in RESERVED_SUFFIXES if name.endswith(s)), None)


def kappa_home() -> Path:
    """The state folder (created on demand by whoever writes into it)."""
    return Path(configuration.read(HOME_ENV)).resolve()


@contextmanager
def absolute_home() -> Iterator[Path]:
    """For one command: ``KAPPA_HOME`` (and ``KAPPA_CACHE``, if set) as absolute paths
    in this process's environment, so every process it starts finds the same folders.
    A job runs in its run folder: a relative or unset ``KAPPA_HOME`` would otherwise
    give each cell its own ``.kappa/cache`` there (never shared, rebuilt by every cell).
    The environment is restored afterwards (the command may run inside a test)."""
    saved = {name: os.environ.get(name) for name in (HOME_ENV, CACHE_ENV)}
    home = kappa_home()
    cache = configuration.read(CACHE_ENV)
    os.environ[HOME_ENV] = str(home)
    if cache:
        os.environ[CACHE_ENV] = str(Path(cache).resolve())
    try:
        yield home
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def registry_url(override: str | None = None) -> str:
    """The registry's SQLAlchemy URL: ``--registry``, else ``KAPPA_REGISTRY``, else SQLite."""
    default = f"sqlite:///{kappa_home() / 'registry.db'}"
    return override or configuration.read("KAPPA_REGISTRY") or default


def mlflow_uri(override: str | None = None) -> str:
    """The MLflow URI: ``--mlflow``, else ``KAPPA_MLFLOW_URI``, else SQLite beside the registry."""
    default = f"sqlite:///{kappa_home() / 'mlflow.db'}"
    return override or configuration.read("KAPPA_MLFLOW_URI") or default


def local_store_path(uri: str) -> Path | None:
    """The file or folder of a local MLflow store (``sqlite:///``, ``file:``), else None."""
    from urllib.parse import unquote, urlsplit

    if uri.startswith("sqlite:///"):
        return Path(uri.removeprefix("sqlite:///").split("?", 1)[0]).resolve()
    if uri.startswith("file:"):
        return Path(unquote(urlsplit(uri).path)).resolve()
    if "://" not in uri and not uri.startswith("sqlite:"):
        return Path(uri).resolve()  # a bare path is a file store
    return None


def readable_mlflow_uri(override: str | None = None) -> str | None:
    """:func:`mlflow_uri`, or ``None`` when it is a local store that does not exist:
    opening one creates it, and a command that only reads must create nothing."""
    uri = mlflow_uri(override)
    local = local_store_path(uri)
    return None if local is not None and not local.exists() else uri


def mlflow_artifact_root() -> Path:
    """Artifact folder for the default local MLflow store."""
    return kappa_home() / "mlartifacts"


def runs_root() -> Path:
    """Run folders live at ``runs_root() / <sweep name> / <cell id>``."""
    return kappa_home() / "runs"


@lru_cache(maxsize=8)
def _runs_root_of(home: str, cwd: str) -> str:
    """:func:`runs_root` for ``KAPPA_HOME=home`` seen from ``cwd`` (cached: asked per cell)."""
    return str((Path(cwd) / home).resolve() / "runs")


def rehomed_run_dir(stored: str | None, sweep: str) -> str | None:
    """A run folder as the registry recorded it (absolute, under the ``KAPPA_HOME`` of its
    submit), where it is now: a folder of ``sweep`` under another home's ``runs/`` that is
    not there any more is the same folder under today's :func:`runs_root` (the home was
    moved); anything else as stored. Called for every cell read: only string checks unless
    the folder lies outside today's home."""
    if not stored:
        return stored
    path = Path(stored)
    if path.parent.name != sweep or path.parent.parent.name != "runs":
        return stored  # not a folder the path rule made
    root = _runs_root_of(configuration.read(HOME_ENV), os.getcwd())
    if stored.startswith(root + os.sep) or path.exists():
        return stored
    return os.path.join(root, sweep, path.name)


def cache_dir() -> Path:
    """Content-addressed caches (warm-start checkpoints, composed configs)."""
    return Path(configuration.read(CACHE_ENV) or kappa_home() / "cache").resolve()
