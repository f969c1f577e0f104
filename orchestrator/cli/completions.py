"""What Tab offers for a command's values (``kappa completion``): sweep names and cell ids
from the registry, and the fixed values of string options. A completion never fails and
never creates anything: a registry that does not exist, cannot be reached or is outdated
completes nothing. It reads only names (no settings, no plan); ``--registry`` typed before
the Tab is the registry read."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import typer

# At most this many cell ids are offered (a sweep may hold 100,000).
MAX_CELLS = 200


def _names(ctx: typer.Context, incomplete: str, sweeps: bool, cells: bool) -> list[str]:
    from orchestrator.sweeps.stores import Stores

    found: list[str] = []
    try:
        with Stores(ctx.params.get("registry")).open_registry(create=False) as registry:
            names = registry.sweep_names()
            if sweeps:
                found += [name for name in names if name.startswith(incomplete)]
            for name in names if cells else ():
                found += [cell_id for cell_id, _ in registry.cell_keys(name)
                          if cell_id.startswith(incomplete)]
                if len(found) >= MAX_CELLS:
                    break
    except Exception:  # Tab must never print a traceback into the command line
        return found
    return list(dict.fromkeys(found))[:MAX_CELLS]


def sweep_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """The recorded sweeps whose names start with ``incomplete``, newest first."""
    return _names(ctx, incomplete, sweeps=True, cells=False)


def cell_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    """The cell ids (of any sweep) that start with ``incomplete``."""
    return _names(ctx, incomplete, sweeps=False, cells=True)


def sweeps_and_cells(ctx: typer.Context, incomplete: str) -> list[str]:
    """Sweep names, then cell ids, that start with ``incomplete``."""
    return _names(ctx, incomplete, sweeps=True, cells=True)


def values(known: Iterable[str] | Callable[[], Iterable[str]]) -> Callable[[str], list[str]]:
    """Completion of an option whose values are ``known`` (or what that function returns,
    asked only on Tab, so that a module it needs is imported only then)."""
    def complete(incomplete: str) -> list[str]:
        try:
            offered = known() if callable(known) else known
            return [value for value in offered if value.startswith(incomplete)]
        except Exception:
            return []

    return complete
