"""Dotted setting paths: which names a settings model accepts, and flattening (a nested
setting named with dots, ``model.d_model``, or nested, ``model: {d_model: 64}``: one path)."""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from orchestrator.limits import MAX_SUGGESTION_CANDIDATES

LeafPath = tuple[str, ...]
T = TypeVar("T")


def _submodels(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return [model for arg in typing.get_args(annotation) for model in _submodels(arg)]
    return []


def settings_paths(model: type[BaseModel]) -> frozenset[str]:
    """Every dotted setting name ``model`` accepts, nested models included (a field
    ``inner`` of a model with a field ``d``: ``inner`` and ``inner.d``)."""
    return frozenset(model.model_fields) | {
        f"{name}.{inner}" for name, field in model.model_fields.items()
        for sub in _submodels(field.annotation) for inner in settings_paths(sub)}


def flatten(mapping: Mapping[str, Any]) -> dict[LeafPath, Any]:
    """Leaf path -> value; dotted keys and nested mappings both descend.

    >>> flatten({"model.d_model": 64, "warm_start": {"steps": 0}, "seed": 1})
    {('model', 'd_model'): 64, ('warm_start', 'steps'): 0, ('seed',): 1}
    """
    return {leaf: value for leaf, _, value in written_leaves(mapping)}


def written_leaves(mapping: Mapping[str, Any]) -> list[tuple[LeafPath, tuple[str, ...], Any]]:
    """Each leaf of ``mapping`` as ``(leaf path, the YAML keys that lead to it, value)``; unlike
    :func:`flatten` it keeps a leaf written twice, so that the repetition can be reported."""
    leaves: list[tuple[LeafPath, tuple[str, ...], Any]] = []
    for key, value in mapping.items():
        path = tuple(str(key).split("."))
        if isinstance(value, Mapping) and value:
            leaves += [(path + leaf, (str(key), *keys), inner)
                       for leaf, keys, inner in written_leaves(value)]
        else:
            leaves.append((path, (str(key),), value))
    return leaves


def nest(leaves: Mapping[LeafPath, Any]) -> dict[str, Any]:
    """The nested mapping of leaf paths (inverse of :func:`flatten`)."""
    root: dict[str, Any] = {}
    for path, value in leaves.items():
        node = root
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[path[-1]] = value
    return root


def undot(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """``mapping`` with dotted keys turned into nested mappings (what a backend reads).

    >>> undot({"model.d_model": 64, "model": {"n_heads": 4}, "seed": 1})
    {'model': {'d_model': 64, 'n_heads': 4}, 'seed': 1}
    """
    return nest(flatten(mapping))


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` merged in (nested mappings merge, anything else replaces);
    neither input is modified."""
    merged = dict(base)
    for key, value in override.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            value = deep_merge(old, value)
        merged[key] = value
    return merged


class LeafIndex(Generic[T]):
    """Values filed under leaf paths, found by any path overlapping theirs (one a prefix of
    the other) in a few lookups (comparing every pair took minutes on 10^4 settings)."""

    def __init__(self) -> None:
        self._whole: dict[LeafPath, list[T]] = {}  # leaf -> its values
        self._under: dict[LeafPath, list[T]] = {}  # proper prefix -> the longer leaves' values

    @classmethod
    def of(cls, leaves: Iterable[LeafPath]) -> LeafIndex[LeafPath]:
        """Each of ``leaves`` filed under itself."""
        index: LeafIndex[LeafPath] = LeafIndex()
        for leaf in leaves:
            index.add(leaf, leaf)
        return index

    def add(self, leaf: LeafPath, value: T) -> None:
        """File ``value`` under ``leaf``."""
        self._whole.setdefault(leaf, []).append(value)
        for n in range(1, len(leaf)):
            self._under.setdefault(leaf[:n], []).append(value)

    def overlapping(self, path: LeafPath) -> list[T]:
        """The values of the leaves equal to, above or below ``path`` (filing order per leaf)."""
        found = [v for n in range(1, len(path) + 1) for v in self._whole.get(path[:n], ())]
        return found + self._under.get(path, [])


def overlaps(a: LeafPath, b: LeafPath) -> bool:
    """Whether one path is a prefix of (or equal to) the other."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """``"did you mean 'x'?"`` for the closest known name, if any (fuzzy matching costs the
    product: only among ``MAX_SUGGESTION_CANDIDATES`` names, for names of <= 200 chars)."""
    candidates = sorted(known)
    if len(candidates) > MAX_SUGGESTION_CANDIDATES or len(name) > 200:
        return None
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None
