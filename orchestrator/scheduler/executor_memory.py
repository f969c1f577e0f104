"""The executor a sweep runs on, remembered in the registry (not on one machine).

A sweep's executor name and options live in its registry row (migration 0004), so a
scheduler, ``kappa resume`` or ``kappa cancel`` on any machine sharing the registry
continues on the same executor. The registry is shared by a team: a password in an
option (a cluster URL's ``user:secret@``, a ``password=`` pair) is stored masked
(:func:`orchestrator.redact.redact`), and an option still masked when it is used is
refused with the fix (give it again: ``-E``/``--ray-address``/the environment), never
sent to a cluster as ``***``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.errors import Problem, UserInputError
from orchestrator.redact import MASK, redact
from orchestrator.registry import Registry


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v) for v in value]
    return value


def storable(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as the registry keeps them: every password masked."""
    return {k: _masked(v) for k, v in options.items()}


def is_masked(value: Any) -> bool:
    """Whether ``value`` holds a password that :func:`storable` masked."""
    if isinstance(value, Mapping):
        return any(is_masked(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(is_masked(v) for v in value)
    if not isinstance(value, str) or MASK not in value:
        return False
    probe = value.replace(MASK, "x")
    return redact(probe) != probe


def check_unmasked(sweep: str, name: str, options: Mapping[str, Any]) -> None:
    """Refuse options whose password the registry could not keep (UserInputError)."""
    masked = sorted(k for k, v in options.items() if is_masked(v))
    if masked:
        raise UserInputError(
            f"the {name} executor of sweep {sweep} needs a password kappa does not store",
            [Problem(f"executor.{key}", "remembered with its password masked (the "
                     "registry is shared, so passwords stay out of it)",
                     found=str(options[key]),
                     fix=f"give it again: `-E {key}=...`"
                     + (" or --ray-address / RAY_ADDRESS" if key == "address" else ""))
             for key in masked])


def recall(registry: Registry, sweep: str) -> tuple[str, dict[str, Any]] | None:
    """The executor name and (stored) options the sweep last ran on, or ``None``."""
    if registry.find_sweep(sweep) is None:
        return None
    return registry.executor(sweep)


def remember(registry: Registry, sweep: str, name: str, options: Mapping[str, Any]) -> None:
    """Record the sweep's executor (a no-op when nothing changed)."""
    stored = storable(options)
    if recall(registry, sweep) != (name, stored):
        registry.set_executor(sweep, name, stored)
