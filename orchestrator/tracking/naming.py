"""How a cell appears in MLflow: its run name, tags and params (pure, no MLflow import).

A run is named by the axes that vary across its sweep, short (:func:`short_names`:
``grpo +RB s1``). Axes appear as tags ``axis.<name>`` (search, group by) and once as
params ``axis.<name>`` (the UI's charts plot params). Values past MLflow 3's limits (keys
250 characters, params 6000, tags 8000, 100 params+tags per ``log_batch``) are cut with a
visible marker, never rejected. None of this feeds a cell's id or settings.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from orchestrator.paths import is_canary_sweep
from orchestrator.runs.folder import CellFacts

MAX_KEY_LENGTH = 250
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAG_VALUE_LENGTH = 8000
MAX_PARAMS_TAGS_PER_BATCH = 100
TRUNCATED = "…[truncated]"
CANARY_TAG = "kappa.canary"
SEED_AXIS = "seed"  # its values name runs as ``s<N>``
MAX_NAME_PART = 24  # characters of one axis's part of a run name
MAX_SHORT_NAME = 100  # characters of a run name, before an id that makes it unique

# MLflow accepts alphanumerics, underscores, dashes, periods, spaces, slashes and colons.
_BAD_KEY_CHARS = re.compile(r"[^\w\-. /:]")


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a marker if it was cut."""
    return text if len(text) <= limit else text[: limit - len(TRUNCATED)] + TRUNCATED


def safe_key(key: str) -> str:
    """A param/tag key MLflow accepts: odd characters become ``_``, length capped."""
    return _BAD_KEY_CHARS.sub("_", key)[:MAX_KEY_LENGTH]


def metric_key(name: str) -> str:
    """A metric name as MLflow stores it: ``@`` (rejected by MLflow) becomes ``_at_``, as
    verl's MLflow logger writes it (``mean@8`` -> ``mean_at_8``)."""
    return safe_key(name.replace("@", "_at_"))


def render_value(value: Any) -> str:
    """A setting as text: strings as-is, everything else as compact JSON (``true``, ``0.1``)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=False, default=str)


def flatten(settings: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Nested mappings as ``("a.b.c", leaf)`` pairs; lists stay leaves."""
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from flatten(value, prefix=f"{name}.")
        else:
            yield name, value


def settings_params(settings: Any) -> dict[str, str]:
    """The resolved settings as MLflow params: flattened with ``.``, values clipped."""
    if hasattr(settings, "model_dump"):
        settings = settings.model_dump(mode="json")
    return {safe_key(key): clip(render_value(value), MAX_PARAM_VALUE_LENGTH)
            for key, value in flatten(settings)}


def axis_params(axes: Mapping[str, Any], labels: Any,
                limit: int = MAX_PARAM_VALUE_LENGTH) -> dict[str, str]:
    """The axes as params ``axis.<name>``: each its label (else value), cut at ``limit``."""
    return {safe_key(f"axis.{name}"): clip(render_value(value), limit)
            for name, value in _shown(axes, labels).items()}


def _shown(axes: Mapping[str, Any], labels: Any) -> dict[str, Any]:
    """The axis values as shown: a label where the spec gives one."""
    label_map = labels if isinstance(labels, Mapping) else {}
    return {name: label_map.get(name, value) for name, value in axes.items()}


def _tidy(text: str, limit: int) -> str:
    """``text`` on one line (control, format and separator characters as spaces, runs of
    spaces as one), cut to ``limit`` characters with ``…``."""
    text = " ".join("".join(" " if unicodedata.category(ch)[0] in "CZ" else ch
                            for ch in text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _abbreviation(axis: str) -> str:
    """``RB`` for ``reward_budget``: the initials of a name of several words (of its last
    dotted part), else the word itself."""
    words = [w for w in re.split(r"[\W_]+", axis.rpartition(".")[2]) if w]
    return "".join(w[0] for w in words).upper() if len(words) > 1 else axis


def _part(axis: str, value: Any, flag: str) -> str:
    """One axis's part of a run name: ``+RB``/``-RB`` (a boolean), ``s1`` (the seed), a
    text value alone (``grpo``), else ``axis=value``."""
    if isinstance(value, bool):
        return ("+" if value else "-") + flag
    if axis == SEED_AXIS and isinstance(value, int):
        return f"s{value}"
    return _tidy(value if isinstance(value, str) else f"{axis}={render_value(value)}",
                 MAX_NAME_PART)


def short_names(cells: Iterable[CellFacts]) -> dict[str, str]:
    """Cell id -> a short run name made of the axes whose values differ among ``cells``
    (all axes when none does), in axis order, e.g. ``grpo +RB s1``; unique among
    ``cells``: a name two cells would share ends with the cell's id (``[3be1eb]``)."""
    shown = {cell.cell_id: _shown(cell.axes, cell.labels) for cell in cells}
    axes = list(dict.fromkeys(a for values in shown.values() for a in values))
    varying = [a for a in axes if len({render_value(v.get(a)) for v in shown.values()}) > 1]
    named = varying or axes
    flags = {a: _abbreviation(a) for a in named}
    clashing = {f for f, n in Counter(flags.values()).items() if n > 1}
    flags = {a: a if f in clashing else f for a, f in flags.items()}
    names = {cell_id: _tidy(" ".join(_part(a, values[a], flags[a]) for a in named
                                     if a in values) or "cell", MAX_SHORT_NAME)
             for cell_id, values in shown.items()}
    taken = Counter(names.values())
    for width in (6, None):  # the whole id if two ids start alike
        unique = {cell_id: name if taken[name] == 1 else f"{name} [{cell_id[:width]}]"
                  for cell_id, name in names.items()}
        if len(set(unique.values())) == len(unique):
            break
    return unique


def cell_tags(axes: Mapping[str, Any], labels: Any, *, cell_id: str, sweep_name: str,
              git_commit: str | None) -> dict[str, str]:
    """The tags of a cell's child run: ``axis.<name>`` per axis, plus ``kappa.*``."""
    tags = axis_params(axes, labels, MAX_TAG_VALUE_LENGTH)
    tags["kappa.cell_id"] = cell_id
    tags["kappa.sweep"] = clip(sweep_name, MAX_TAG_VALUE_LENGTH)
    if isinstance(labels, Mapping):  # a search's trial: its study and trial number
        tags.update({key: clip(str(labels[key]), MAX_TAG_VALUE_LENGTH)
                     for key in ("kappa.study", "kappa.trial") if key in labels})
    tags.update(sweep_kind_tags(sweep_name))
    if git_commit:
        tags["kappa.git_commit"] = git_commit
    return tags


def sweep_kind_tags(sweep_name: str) -> dict[str, str]:
    """``kappa.canary: true`` on every run of a canary sweep (so searches skip them)."""
    return {CANARY_TAG: "true"} if is_canary_sweep(sweep_name) else {}


def batches(items: Mapping[str, str],
            size: int = MAX_PARAMS_TAGS_PER_BATCH) -> Iterator[list[tuple[str, str]]]:
    """``items`` in chunks of at most ``size`` (MLflow's per-call limit)."""
    pairs = list(items.items())
    for start in range(0, len(pairs), size):
        yield pairs[start : start + size]
