"""Preflight (docs/verl.md#preflight): every cell composed through verl's own Hydra config in a
:mod:`.compose_worker` subprocess (started on the first cache miss, kept for this process),
answers cached on disk by content hash. A missing plug-in is caught on every call, a broken
one when the worker starts."""

from __future__ import annotations

import atexit
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator import configuration
from orchestrator.backends.verl.command import PLUGIN_MODULE, phases, verl_command
from orchestrator.backends.verl.settings import VerlSettings
from orchestrator.errors import KappaError, Problem, UserInputError
from orchestrator.paths import cache_dir
from orchestrator.runs.atomic import write_atomic

CACHE_SCHEMA = 1
# A stand-in run folder: preflight checks the settings, not where they will run, so
# equal settings share one cache entry across sweeps.
PREFLIGHT_RUN_DIR = Path("/kappa-preflight/sweep/cell")
PLUGIN_LOCATION = "verl plug-in (kappa_verl)"
_KAPPA_ROOT = Path(__file__).resolve().parents[3]


def plugin_install_fix() -> str:
    """The commands that install and verify the plug-in in this Python environment."""
    python = sys.executable
    return (f"`{python} -m pip install --no-deps -e {_KAPPA_ROOT / 'plugins'}`, then "
            f"`{python} -c 'import kappa_verl; kappa_verl.check()'` must succeed "
            "(plugins/README.md)")


def plugin_error(found: str) -> UserInputError:
    """The error for a plug-in that is missing or fails its check."""
    return UserInputError("verl preflight failed", [Problem(
        location=PLUGIN_LOCATION,
        message="kappa's verl plug-in is missing or broken where verl is installed",
        found=found, fix=plugin_install_fix())])


class ComposeWorker:
    """A long-lived compose_worker subprocess (verl imported once)."""

    def __init__(self) -> None:
        env = dict(os.environ, VERL_USE_EXTERNAL_PLUGINS="none", OMP_NUM_THREADS="1",
                   HYDRA_FULL_ERROR="0")
        # stderr to a file (an unread pipe could fill and block it): a dead worker says why.
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (lives with the worker)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.backends.verl.compose_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            text=True, env=env)
        hello = self._read()
        if "plugin_error" in hello:
            self.close()
            raise plugin_error(str(hello["plugin_error"]))
        self.plugin_facts: dict[str, str] = hello.get("plugin") or {}

    def _read(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait()
            self._stderr.seek(0)
            tail = "\n".join(self._stderr.read().strip().splitlines()[-15:])
            raise KappaError(f"verl preflight: the compose worker exited ({code}) while "
                             f"loading verl's config{':' if tail else ''}\n{tail}\n"
                             f"(rerun it alone: `{sys.executable} -m orchestrator.backends."
                             "verl.compose_worker`; KAPPA_VERL_PREFLIGHT=off skips preflight)")
        return json.loads(line)

    def check(self, overrides: list[str], extra: list[str]) -> list[list[str]]:
        """Problems of one override list, as ``[override or key, message]`` pairs."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps({"overrides": overrides, "extra": extra}) + "\n")
        self._proc.stdin.flush()
        return self._read()["problems"]

    def close(self) -> None:
        """Stop the subprocess (idempotent)."""
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._stderr.close()


_worker: ComposeWorker | None = None


def _get_worker() -> ComposeWorker:
    global _worker
    if _worker is None:
        _worker = ComposeWorker()
        atexit.register(_worker.close)
    return _worker


def close_worker() -> None:
    """Stop the shared compose worker, if one was started."""
    global _worker
    if _worker is not None:
        _worker.close()
        _worker = None


def check_overrides(overrides: list[str], extra: list[str], version: str) -> list[list[str]]:
    """Problems of one composed command, from the disk cache, else the worker."""
    key = json.dumps({"schema": CACHE_SCHEMA, "verl": version, "overrides": overrides,
                      "extra": extra})
    path = cache_dir() / "verl-preflight" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    problems = _get_worker().check(overrides, extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(problems))  # parallel planners never read half a file
    return problems


def _location(label: str, key: str, extra: tuple[str, ...]) -> tuple[str, str | None]:
    # Where a problem lives (extra_overrides when one of them set key) and the override to show.
    where, shown = key, None
    for override in extra:
        if override == key or override.lstrip("+~").split("=", 1)[0] == key:
            where, shown = "extra_overrides", override
    return (f"{label}.{where}" if label else where), shown


def preflight(cells: Mapping[str, VerlSettings]) -> None:
    """Compose each phase of every cell against verl: one error, each problem at its setting."""
    if not configuration.read("KAPPA_VERL_PREFLIGHT"):
        return
    try:  # the installed verl's version, read without importing verl
        version = importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        warnings.warn("verl is not installed here: verl cells were not preflighted",
                      stacklevel=2)
        return
    if importlib.util.find_spec(PLUGIN_MODULE) is None:  # a cache hit would not notice
        raise plugin_error(f"verl {version} is installed but package {PLUGIN_MODULE!r} is not "
                           f"importable by {sys.executable}")
    problems: list[Problem] = []
    for label, settings in cells.items():
        for phase in phases(settings):
            argv = verl_command(settings, PREFLIGHT_RUN_DIR, phase=phase)
            split = len(argv) - len(settings.extra_overrides)  # the extra overrides come last
            for key, message in check_overrides(argv[3:split], argv[split:], version):
                location, shown = _location(label, key, settings.extra_overrides)
                detail = " ".join(message.splitlines()[:2])[:400]
                problems.append(Problem(
                    location=location,
                    message=f"verl {version} rejects this cell ({phase.name} phase)",
                    found=f"{shown}: {detail}" if shown else detail,
                    fix="fix the setting or override named here; `python3 -m "
                        "verl.trainer.main_ppo --cfg job <overrides>` shows verl's config"))
    if problems:
        # A two-phase cell repeats its problems per phase: report each once.
        raise UserInputError("verl preflight failed",
                             list({(p.location, p.found): p for p in problems}.values()))
