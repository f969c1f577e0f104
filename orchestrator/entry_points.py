"""Plug-ins found through entry points: executors (``kappa.executors``) and backends
(``kappa.backends``), kappa's own included (docs/architecture.md#plug-ins).

A :class:`PluginRegistry` maps a plug-in's name to its ``"module:attr"`` reference, read
from the installed distributions on first use only (a scan of every package's metadata),
so importing it and ``kappa --help`` stay instant. It is a mutable mapping, so a program
or a test can add a plug-in in-process (``BACKENDS["fake"] = "my_module:FakeBackend"``)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import Problem, UserInputError, unknown_name

REINSTALL_FIX = "reinstall kappa (`pip install -e .` in its checkout), which registers them"


@dataclass(frozen=True)
class PluginSource:
    """Where a plug-in's reference came from: an entry point (with its distribution) or
    an in-process registration (``distribution`` ``None``)."""

    name: str
    value: str
    group: str
    distribution: str | None = None

    def describe(self) -> str:
        """``kappa.executors: slurm = pkg.mod:Cls (from pkg 1.0)``."""
        where = f" (from {self.distribution})" if self.distribution else " (set in-process)"
        return f"{self.group}: {self.name} = {self.value}{where}"


class PluginRegistry(MutableMapping[str, str]):
    """Plug-ins of one entry-point ``group``: name -> ``"module:attr"``, read lazily."""

    def __init__(self, group: str, kind: str) -> None:
        self.group = group
        self.kind = kind
        self._found: dict[str, PluginSource] | None = None
        self._clashes: dict[str, list[PluginSource]] = {}
        self._loaded: dict[str, Any] = {}

    # -- discovery ----------------------------------------------------------------------
    def _sources(self) -> dict[str, PluginSource]:
        if self._found is None:
            from importlib.metadata import entry_points

            found: dict[str, PluginSource] = {}
            for point in entry_points(group=self.group):
                dist = getattr(point, "dist", None)
                label = f"{dist.name} {dist.version}" if dist is not None else None
                source = PluginSource(point.name, point.value, self.group, label)
                if point.name in found and found[point.name].value != point.value:
                    self._clashes.setdefault(point.name, [found[point.name]]).append(source)
                    continue
                found.setdefault(point.name, source)
            self._found = found
        return self._found

    def refresh(self) -> None:
        """Forget what was found (and loaded), so the next use reads the entry points again: after
        installing a plug-in in a running process. In-process additions are forgotten too."""
        self._found = None
        self._clashes = {}
        self._loaded = {}

    def source(self, name: str) -> PluginSource:
        """Where plug-in ``name`` comes from; an unknown name lists the known ones."""
        sources = self._sources()
        if name not in sources:
            if not sources:
                raise UserInputError(f"no {self.kind}s are installed", [Problem(
                    self.kind, f"no entry points in group {self.group}", found=repr(name),
                    fix=REINSTALL_FIX)])
            raise unknown_name(self.kind, name, sources, location=self.kind)
        return sources[name]

    # -- MutableMapping -------------------------------------------------------------------
    def __getitem__(self, name: str) -> str:
        return self._sources()[name].value

    def __setitem__(self, name: str, value: str) -> None:
        self._sources()[name] = PluginSource(name, value, self.group)
        self._clashes.pop(name, None)
        self._loaded.pop(name, None)

    def __delitem__(self, name: str) -> None:
        del self._sources()[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._sources()))

    def __len__(self) -> int:
        return len(self._sources())

    def __repr__(self) -> str:
        return f"PluginRegistry({self.group!r}, {dict(self)!r})"

    # -- loading --------------------------------------------------------------------------
    def load(self, name: str) -> Any:
        """The object plug-in ``name`` refers to, imported (once). Raises :class:`UserInputError`
        for an unknown name (listing the known ones), for a name two distributions register
        differently, and for a plug-in that cannot be imported (naming its entry point, its
        distribution and the import error)."""
        source = self.source(name)
        if name in self._clashes:
            raise UserInputError(f"{self.kind} '{name}' is registered twice", [Problem(
                self.kind, "two installed distributions register this name differently",
                found="; ".join(s.describe() for s in self._clashes[name]),
                fix="uninstall one of the distributions")])
        if name in self._loaded:
            return self._loaded[name]
        module_name, _, attr = source.value.partition(":")
        try:
            obj: Any = importlib.import_module(module_name.strip())
            for part in attr.strip().split(".") if attr.strip() else ():
                obj = getattr(obj, part)
        except Exception as exc:
            raise self.broken(source, f"cannot be loaded: {type(exc).__name__}: {exc}") from exc
        self._loaded[name] = obj
        return obj

    def broken(self, source: PluginSource, why: str) -> UserInputError:
        """The error for a plug-in that is installed but unusable."""
        fix = (f"fix or uninstall the distribution {source.distribution.split()[0]}"
               if source.distribution else "fix the in-process registration")
        return UserInputError(f"the {self.kind} plug-in '{source.name}' {why}", [Problem(
            self.kind, f"broken plug-in {source.describe()}", found=why, fix=fix)])


__all__ = ["PluginRegistry", "PluginSource"]
