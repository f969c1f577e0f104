"""Backends: what a launch of one cell is (the embedded trainer, verl).

The registry maps a backend name to ``"module:Class"`` so that importing this package
stays cheap; :func:`get_backend` imports the one asked for.
"""

from __future__ import annotations

import importlib

from orchestrator.backends.base import Backend, LaunchSpec
from orchestrator.errors import unknown_name

BACKENDS: dict[str, str] = {
    "embedded": "orchestrator.backends.embedded.backend:EmbeddedBackend",
    "verl": "orchestrator.backends.verl.backend:VerlBackend",
}


def get_backend(name: str) -> Backend:
    """The backend registered under ``name``; an unknown name lists the known ones."""
    if name not in BACKENDS:
        raise unknown_name("backend", name, BACKENDS, location="backend")
    module_name, _, attr = BACKENDS[name].partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    backend: Backend = cls()
    return backend


__all__ = ["BACKENDS", "Backend", "LaunchSpec", "get_backend"]
