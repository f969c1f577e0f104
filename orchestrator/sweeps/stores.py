"""Where a sweep's state lives (:class:`Stores`): the registry and the MLflow store, as
given on the command line or, by default, under ``KAPPA_HOME``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator import paths
from orchestrator.registry import Registry, RegistryMissing


@dataclass(frozen=True)
class Stores:
    """Where a sweep's state lives: registry URL and MLflow URI (None: the defaults)."""

    registry_url: str | None = None
    mlflow_uri: str | None = None

    def open_registry(self, create: bool = True) -> Registry:
        """Open the registry: created on first use, or (``create=False``, for commands
        that only read) refused with the fix when it does not exist yet."""
        return Registry.open(self.registry_url, create=create)

    def mlflow_client(self) -> Any:
        """A client of the MLflow store (``mlflow.MlflowClient``; imports MLflow)."""
        from orchestrator.tracking import Tracker

        return Tracker(self.mlflow_uri).client

    def env(self) -> dict[str, str]:
        """The same stores as ``KAPPA_REGISTRY``/``KAPPA_MLFLOW_URI``, for a process
        started from here. Never as options: a URL's password would be on its command
        line, which every user of the machine can read (``ps``, ``/proc/PID/cmdline``)."""
        from orchestrator.tracking import absolute_uri

        return {"KAPPA_REGISTRY": paths.registry_url(self.registry_url),
                "KAPPA_MLFLOW_URI": absolute_uri(paths.mlflow_uri(self.mlflow_uri))}


__all__ = ["RegistryMissing", "Stores"]
