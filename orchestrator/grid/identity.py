"""A cell and its id: one point of the grid, named by the first 12 hex digits of the SHA-256 of the
canonical JSON of ``{"backend", "settings", "labels"}``, the settings validated and with defaults
(why: docs/spec.md#cells). :func:`content_id` is the definition; :class:`CellBuilder` computes the
same fast: a cell's canonical JSON is its labels plus its sorted ``"key":value`` settings
fragments, one per setting no axis touches, per value of the axis owning it, or per combination of
the axes sharing it (``model.d_model`` and ``model.n_heads``), each serialized once, from the first
validated cell having it; consecutive cells share all but the last axis's fragments. Equal to
:func:`content_id` (tested on random specs) if a backend's validators never rewrite one setting
from another."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from pydantic import BaseModel

from orchestrator.grid.assignments import Assignment, AxisValue
from orchestrator.spec.model import JsonScalarValue, Spec
from orchestrator.spec.settings_paths import deep_merge, undot

ID_LENGTH = 12


def canonical_json(value: Any) -> str:
    """The one JSON text of ``value`` that ids hash: sorted keys, no whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def content_id(backend: str, settings_dump: Mapping[str, Any],
               labels: Mapping[str, JsonScalarValue]) -> str:
    """The id of a cell with these validated settings (incl. defaults) and labels."""
    text = canonical_json({"backend": backend, "settings": dict(settings_dump),
                           "labels": dict(labels)})
    return hashlib.sha256(text.encode()).hexdigest()[:ID_LENGTH]


class Cell(NamedTuple):
    """One point of the grid (fields: docs/spec.md#cells; ``settings`` is read-only, cells share
    nested mappings). A named tuple: half the cost of a frozen dataclass to create, which matters
    at 100k cells."""

    # Shadows tuple.index on purpose: the position in the grid is what callers want.
    index: int  # type: ignore[assignment]
    cell_id: str
    axes: dict[str, JsonScalarValue]
    labels: dict[str, JsonScalarValue]
    settings: dict[str, Any]

    def describe(self) -> str:
        """``baseline=grpo, seed=0`` — the axis values, for humans."""
        return ", ".join(f"{name}={value}" for name, value in self.axes.items())


_MISSING = object()
# One slot of the text template: the axis positions it depends on, what picks the text from an
# assignment, and the texts (a list by value for one axis, a dict by combination for several).
_Slot = tuple[tuple[int, ...], Callable[[Assignment], Any], Any]
# Prepared work for cells sharing all but the last axis value: (a[:-1], static text chunks around
# the dynamic slots, the dynamic slots, settings and axes without the last axis, shared keys that
# involve the last axis).
_Prepared = tuple[Assignment, list[str], list[tuple[Callable[[Assignment], Any], Any]],
                  dict[str, Any], dict[str, Any], list[str]]


def _frag(key: str, value: Any) -> str:
    return f"{json.dumps(key)}:{canonical_json(value)}"


class CellBuilder:
    """Builds one grid's settings, ids and :class:`Cell` objects: :meth:`settings` for any
    cell, :meth:`learn` with every validated cell, then :meth:`build`."""

    def __init__(self, spec: Spec, table: Mapping[str, Sequence[AxisValue]]) -> None:
        self.names = list(spec.axes)
        self.backend = spec.backend
        # base may spell nested settings with dots, as variants may; the backend reads
        # (and config.yaml gets) them nested.
        self.base = undot(spec.base)
        self.values = [[v.value for v in table[a]] for a in self.names]
        self.records = [list(table[a]) for a in self.names]
        axis_keys = [set().union(*(v.top_keys for v in table[a])) for a in self.names]
        counts = Counter(k for keys in axis_keys for k in keys)
        self.shared = sorted(k for k, c in counts.items() if c > 1)
        self.shared_axes = {k: [i for i, keys in enumerate(axis_keys) if k in keys]
                            for k in self.shared}
        self.owner = {k: i for i, keys in enumerate(axis_keys) for k in keys if counts[k] == 1}
        self.own_keys = [sorted(k for k in keys if counts[k] == 1) for keys in axis_keys]
        owned = [set(keys) for keys in self.own_keys]
        self.given = [[self._own_given(record, owned[i]) for record in self.records[i]]
                      for i in range(len(self.names))]
        self.given_axes = [(i, g) for i, g in enumerate(self.given) if any(g)]
        self.shared_given: dict[tuple[str, tuple[int, ...]], Any] = {}
        self.labels = sorted((a, i) for i, a in enumerate(self.names)
                             if table[a] and table[a][0].is_label)
        # Filled by learn(): every fragment, the first time a validated cell has it.
        self.dump0: dict[str, Any] | None = None
        self.own_frags: list[dict[int, dict[str, str]]] = [{} for _ in self.names]
        self.shared_frags: dict[str, dict[tuple[int, ...], str]] = {k: {} for k in self.shared}
        self._template: list[str | _Slot] | None = None
        self._prepared: _Prepared | None = None

    def _own_given(self, record: AxisValue, owned: set[str]) -> dict[str, Any]:
        given = {}
        # The record's own keys, not all the axis's: 10^4 variants with a key each would
        # otherwise cost 10^8 lookups. Sorted (as own_keys is) for config.yaml's order.
        for key in sorted(k for k in record.nested if k in owned):
            base = {key: self.base[key]} if key in self.base else {}
            given[key] = deep_merge(base, {key: record.nested[key]})[key]
        return given

    def _merge_shared(self, given: dict[str, Any], key: str, a: Assignment) -> None:
        """Set ``given[key]`` to the shared setting's value for ``a``'s axes, if any."""
        combo = tuple(a[j] for j in self.shared_axes[key])
        if (key, combo) not in self.shared_given:
            merged: dict[str, Any] = {key: self.base[key]} if key in self.base else {}
            for i, r in zip(self.shared_axes[key], combo, strict=True):
                nested = self.records[i][r].nested
                if key in nested:
                    merged = deep_merge(merged, {key: nested[key]})
            self.shared_given[(key, combo)] = merged.get(key, _MISSING)
        if (value := self.shared_given[(key, combo)]) is not _MISSING:
            given[key] = value

    def settings(self, a: Assignment, skip: int | None = None) -> dict[str, Any]:
        """The cell's settings as given: base, its axis values (but axis ``skip``'s) merged in."""
        given = self.base.copy()
        for i, per_value in self.given_axes:
            if i != skip and per_value[a[i]]:
                given.update(per_value[a[i]])
        for key in self.shared:
            if skip not in self.shared_axes[key]:
                self._merge_shared(given, key, a)
        return given

    def learn(self, a: Assignment, model: BaseModel) -> None:
        """Take the fragments this validated cell is the first to have."""
        dump: dict[str, Any] | None = None
        if self.dump0 is None:
            dump = self.dump0 = model.model_dump(mode="json")
        for i, r in enumerate(a):
            if r not in self.own_frags[i]:
                dump = dump or model.model_dump(mode="json")
                # A key another value of the axis sets may be unknown to the backend:
                # that value's cells fail validation, this valid cell has no such key.
                self.own_frags[i][r] = {k: _frag(k, dump[k]) for k in self.own_keys[i] if k in dump}
        for key in self.shared:
            combo = tuple(a[j] for j in self.shared_axes[key])
            if combo not in self.shared_frags[key]:
                dump = dump or model.model_dump(mode="json")
                if key in dump:
                    self.shared_frags[key][combo] = _frag(key, dump[key])

    def _make_template(self) -> list[str | _Slot]:
        """The canonical JSON as fixed text and slots, in order (fixed text unescaped)."""
        assert self.dump0 is not None, "learn() a validated cell first"
        labels: list[str | _Slot] = [((i,), itemgetter(i), [_frag(a, v) for v in self.values[i]])
                                     for a, i in self.labels]
        settings: list[str | _Slot] = []
        for key in sorted(self.dump0):
            if key in self.shared_frags:
                axes = tuple(self.shared_axes[key])
                settings.append((axes, itemgetter(*axes), self.shared_frags[key]))
            elif key in self.owner:
                i = self.owner[key]
                texts = [self.own_frags[i].get(r, {}).get(key) for r in range(len(self.values[i]))]
                settings.append(((i,), itemgetter(i), texts))
            else:
                settings.append(_frag(key, self.dump0[key]))

        def joined(items: list[str | _Slot]) -> list[str | _Slot]:
            return [part for item in items for part in (",", item)][1:]  # comma-separated

        head = '{"backend":' + json.dumps(self.backend) + ',"labels":{'
        return [head, *joined(labels), '},"settings":{', *joined(settings), "}}"]

    def _prepared_for(self, a: Assignment) -> _Prepared:
        """Everything about cells sharing ``a[:-1]`` (consecutive in grid order), made once."""
        if self._prepared is not None and self._prepared[0] == a[:-1]:
            return self._prepared
        if self._template is None:
            self._template = self._make_template()
        last = len(a) - 1
        chunks: list[str] = [""]  # static text between the slots that depend on the last axis
        dynamic: list[tuple[Callable[[Assignment], Any], Any]] = []
        for part in self._template:
            if isinstance(part, str):
                chunks[-1] += part
            elif last in part[0]:
                dynamic.append((part[1], part[2]))
                chunks.append("")
            else:
                chunks[-1] += part[2][part[1](a)]
        shared_last = [key for key in self.shared if last in self.shared_axes[key]]
        axes = {self.names[i]: self.values[i][a[i]] for i in range(last)}
        self._prepared = (a[:-1], chunks, dynamic, self.settings(a, skip=last), axes, shared_last)
        return self._prepared

    def canonical(self, a: Assignment) -> str:
        """The canonical JSON the id hashes (equal to ``content_id``'s input)."""
        return self._text(self._prepared_for(a), a)

    @staticmethod
    def _text(prepared: _Prepared, a: Assignment) -> str:
        chunks, dynamic = prepared[1], prepared[2]
        if len(dynamic) == 1:  # the usual case: the last axis sets one setting
            get, texts = dynamic[0]
            return chunks[0] + texts[get(a)] + chunks[1]
        parts = [chunks[0]]
        for (get, texts), chunk in zip(dynamic, chunks[1:], strict=True):
            parts += (texts[get(a)], chunk)
        return "".join(parts)

    def build(self, index: int, a: Assignment) -> Cell:
        """The cell at ``index`` of the grid for ``a`` (after every value was learned);
        cells that differ only in the last axis share the work on the other axes."""
        prepared = self._prepared_for(a)
        text = self._text(prepared, a)
        given, axes = prepared[3].copy(), prepared[4].copy()
        if a:
            r = a[-1]
            if own := self.given[-1][r]:
                given.update(own)
            for key in prepared[5]:  # the shared settings the last axis takes part in
                self._merge_shared(given, key, a)
            axes[self.names[-1]] = self.values[-1][r]
        labels = {name: axes[name] for name, _ in self.labels} if self.labels else {}
        return Cell(index, hashlib.sha256(text.encode()).hexdigest()[:ID_LENGTH], axes, labels,
                    given)
