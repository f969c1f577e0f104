"""What made a run's numbers: kappa's code, the backend's numerics and the machine.

The launched process writes ``provenance.json`` when an attempt starts (:func:`write`); the
scheduler stores it with the attempt (the registry, MLflow ``kappa.*`` tags). Its shape::

    {"kappa":    {"version": "0.1.0", "commit": "6496929…" | null, "dirty": bool | null},
     "numerics": {"backend": "embedded", "version": "1", "torch": "2.13.0", ...},
     "machine":  {"cpu_capability": "AVX512", "threads": 2, "gpu": "NVIDIA H200" | null,
                  "gpu_count": 0, "python": "3.11.9", "host": "node-3", "executor": "local"}}

``numerics`` is the backend's numerics version (bumped whenever a change alters results)
and the versions of the libraries that compute them. Two runs are *comparable* when their
:func:`numerics_key` agree (the numerics plus the CPU kernel set and the GPU model); host,
threads, Python and kappa's commit are recorded, not compared (a commit that changes numbers
must bump the numerics version: that is the contract). Torch is read only when the recording
process imported it already, so a reader pays nothing for it.
"""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

# Not `from orchestrator import ...`: the package itself imports this module (--version).
import orchestrator.configuration as configuration
from orchestrator.runs.folder import PROVENANCE_FILE, read_json, write_json

EXECUTOR_ENV = "KAPPA_EXECUTOR"  # set by the scheduler in a job's environment
SECTIONS = ("kappa", "numerics", "machine")
MAX_BYTES = 64 * 1024  # a provenance file is a few hundred bytes; anything far larger is not one
MAX_TEXT = 500  # characters kept of one field (a host name, a version)
# The machine's fields that change floating-point results, compared with the numerics.
_COMPARED_MACHINE = ("cpu_capability", "gpu")
_LABELS = {"cpu_capability": "CPU kernels", "gpu": "GPU"}
_STALE_LABELS = {"version": "numerics version"}


def git_commit(path: Path | None = None) -> str | None:
    """The commit checked out at ``path`` (default: the current folder), or ``None``
    outside a git repository or before its first commit. A dirty tree gets ``-dirty``."""
    def git(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=path, capture_output=True, text=True,
                              check=False, timeout=timeout)

    try:
        head = git("rev-parse", "--verify", "--quiet", "HEAD", timeout=10)
        if head.returncode != 0 or not head.stdout.strip():
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no", timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = head.stdout.strip()
    return f"{commit}-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else commit


@cache
def kappa_source() -> dict[str, Any]:
    """kappa's version and, from a git checkout, its commit and whether tracked files differ
    from it (``None`` for both when kappa is installed without its repository)."""
    installed = library_versions("kappa-orchestrator").get("kappa-orchestrator", "unknown")
    root = Path(__file__).resolve().parents[2]
    commit = git_commit(root) if (root / ".git").exists() else None
    if commit is None:
        return {"version": installed, "commit": None, "dirty": None}
    return {"version": installed, "commit": commit.removesuffix("-dirty"),
            "dirty": commit.endswith("-dirty")}


def library_versions(*names: str) -> dict[str, str]:
    """The installed versions of the named distributions (missing ones left out)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def machine() -> dict[str, Any]:
    """The machine this process runs on (torch's fields only when torch is imported)."""
    torch = sys.modules.get("torch")
    capability = gpu = None
    threads = gpu_count = None
    if torch is not None:
        capability = str(torch.backends.cpu.get_cpu_capability())
        threads = int(torch.get_num_threads())
        gpu_count = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
        gpu = str(torch.cuda.get_device_name(0)) if gpu_count else None
    return {"cpu_capability": capability, "threads": threads, "gpu": gpu,
            "gpu_count": gpu_count, "python": platform.python_version(),
            "host": socket.gethostname(),
            "executor": configuration.read(EXECUTOR_ENV)}


def write(run_dir: Path, numerics: Mapping[str, str]) -> None:
    """Record this attempt's provenance, with the backend's ``numerics``, in ``run_dir``."""
    write_json(run_dir / PROVENANCE_FILE, {"kappa": dict(kappa_source()),
                                           "numerics": dict(numerics), "machine": machine()})


def read(run_dir: Path | str | None) -> dict[str, Any] | None:
    """The provenance a run folder holds, or ``None``: none written, unreadable, larger
    than :data:`MAX_BYTES`, or not of the shape :func:`collect` writes (the job's process
    writes it, and whatever it wrote goes into the registry and MLflow: only sections of
    short text, number or boolean fields are kept)."""
    path = None if run_dir is None else Path(run_dir) / PROVENANCE_FILE
    try:
        if path is None or not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
    except OSError:
        return None
    found = read_json(path) or {}
    kept = {section: {str(k)[:MAX_TEXT]: v if not isinstance(v, str) else v[:MAX_TEXT]
                      for k, v in found[section].items()
                      if v is None or isinstance(v, str | int | float | bool)}
            for section in SECTIONS if isinstance(found.get(section), dict)}
    return kept or None


def flat(record: Mapping[str, Any] | None) -> dict[str, str]:
    """The record as ``{"code.commit": ..., "numerics.torch": ..., "machine.host": ...}``
    (text values, unknown ones left out): MLflow tags and export columns."""
    sections = {"code": "kappa", "numerics": "numerics", "machine": "machine"}
    return {f"{name}.{k}": str(v) for name, key in sections.items()
            for k, v in dict((record or {}).get(key) or {}).items() if v is not None}


def numerics_key(record: Mapping[str, Any] | None) -> dict[str, str]:
    """What two runs must share to be compared: the numerics and the compared machine
    fields, as text; empty for a run without provenance (an older kappa's)."""
    if not record:
        return {}
    key = {str(k): str(v) for k, v in dict(record.get("numerics") or {}).items()}
    host = dict(record.get("machine") or {})
    for name in _COMPARED_MACHINE:
        if host.get(name) is not None:
            key[name] = str(host[name])
    return key


def label(key: Mapping[str, str]) -> str:
    """A short name of one set of numerics: ``embedded v1, torch 2.13.0, CPU kernels AVX512``."""
    if not key:
        return "unknown (no provenance)"
    head = f"{key['backend']} v{key['version']}" if "backend" in key and "version" in key else ""
    rest = [f"{_LABELS.get(k, k)} {v}" for k, v in key.items() if k not in ("backend", "version")]
    return ", ".join(part for part in (head, *rest) if part)


def differences(keys: Sequence[Mapping[str, str]]) -> list[str]:
    """What differs among several runs' :func:`numerics_key` (``torch 2.13.0 vs 2.12.0``),
    one entry per field, values in first-seen order; empty when they agree. A run without
    provenance differs from every run with some."""
    if len({tuple(sorted(k.items())) for k in keys}) <= 1:
        return []
    if any(not k for k in keys):
        return ["provenance unknown for some runs (made before kappa recorded it)"]
    found = []
    for name in dict.fromkeys(n for k in keys for n in k):
        values = list(dict.fromkeys(k.get(name, "—") for k in keys))
        if len(values) > 1:
            found.append(f"{_LABELS.get(name, name)} {' vs '.join(values)}")
    return found


def stale_against(made: Mapping[str, Any] | None, installed: Mapping[str, str]) -> list[str]:
    """How the numerics a finished run recorded (its record's ``numerics``) differ from the
    installed backend's (``numerics version 1 vs 2``, ``torch 2.12.0 vs 2.13.0``), on the
    fields the installed side knows; empty when none differs. A run that recorded none is
    stale (it was made before kappa recorded any)."""
    if not made:
        return ["no provenance recorded"]
    return [f"{_STALE_LABELS.get(k, k)} {made.get(k, '—')} vs {v}"
            for k, v in installed.items() if str(made.get(k)) != str(v)]


def environments(records: Sequence[Mapping[str, Any] | None]) -> str:
    """One line on what made a set of runs' numbers: ``1 environment (embedded v1, torch
    2.13.0, CPU kernels AVX512)``, or how many there were and what differs among them;
    runs without provenance are counted apart. Empty for no runs with provenance."""
    keys = [numerics_key(r) for r in records if r]
    unknown = len(records) - len(keys)
    if not keys:
        return ""
    distinct = list({tuple(sorted(k.items())): k for k in keys}.values())
    head = (f"1 environment ({label(distinct[0])})" if len(distinct) == 1 else
            f"{len(distinct)} environments: {'; '.join(differences(distinct))} differ")
    return head + (f"; {unknown} run(s) without provenance" if unknown else "")


def code_versions(records: Sequence[Mapping[str, Any] | None]) -> list[str]:
    """The distinct kappa versions that made these runs, in first-seen order: ``0.1.0 at
    6496929`` (the commit's first 7 digits, ``-dirty`` when files differed from it)."""
    found = []
    for record in records:
        code = dict((record or {}).get("kappa") or {})
        if not code:
            continue
        commit = code.get("commit")
        at = f" at {str(commit)[:7]}{'-dirty' if code.get('dirty') else ''}" if commit else ""
        found.append(f"{code.get('version', '?')}{at}")
    return list(dict.fromkeys(found))


def made_by(records: Sequence[Mapping[str, Any] | None]) -> str:
    """One line on the numerics and the kappa code that made these runs (``""``: none
    recorded): ``1 environment (embedded v1, ...); kappa 0.1.0 at 6496929``."""
    code = code_versions(records)
    return "; ".join(filter(None, [environments(records),
                                   f"kappa {', '.join(code)}" if code else ""]))
