"""Backends: what a launch of one cell is (the embedded trainer, verl, plug-ins), found
through the entry points of group ``kappa.backends`` (:data:`BACKENDS`, read on first use);
:func:`get_backend` imports the one asked for."""

from __future__ import annotations

from orchestrator.backends.base import Backend, LaunchSpec
from orchestrator.entry_points import PluginRegistry

BACKENDS = PluginRegistry("kappa.backends", "backend")


def get_backend(name: str) -> Backend:
    """The backend registered under ``name`` (an unknown name lists the known ones)."""
    cls = BACKENDS.load(name)
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise BACKENDS.broken(BACKENDS.source(name), "is not a Backend subclass")
    return cls()


__all__ = ["BACKENDS", "Backend", "LaunchSpec", "get_backend"]
