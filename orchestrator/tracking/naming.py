"""How a cell appears in MLflow: its run name, tags and params (pure, no MLflow import).

Axes appear as tags ``axis.<name>`` (search, group by) and as params (the UI's charts
plot params). Values past MLflow 3's limits (keys 250 characters, params 6000, tags 8000,
100 params+tags per ``log_batch``) are cut with a visible marker, never rejected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from orchestrator.paths import is_canary_sweep

MAX_KEY_LENGTH = 250
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAG_VALUE_LENGTH = 8000
MAX_RUN_NAME_LENGTH = 250
MAX_PARAMS_TAGS_PER_BATCH = 100
TRUNCATED = "…[truncated]"
NAME_SEPARATOR = " · "
CANARY_TAG = "kappa.canary"

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
    label_map = labels if isinstance(labels, Mapping) else {}
    return {safe_key(f"axis.{name}"): clip(render_value(label_map.get(name, value)), limit)
            for name, value in axes.items()}


def run_name(axes: Mapping[str, Any], labels: Any) -> str:
    """A readable run name, e.g. ``grpo · rb=true · seed=0`` (a text value stands alone;
    ``0`` or ``true`` means nothing without its axis)."""
    label_map = labels if isinstance(labels, Mapping) else {}
    parts = []
    for name, value in axes.items():
        shown = label_map.get(name, value)
        parts.append(shown if isinstance(shown, str) else f"{name}={render_value(shown)}")
    return clip(NAME_SEPARATOR.join(parts) or "cell", MAX_RUN_NAME_LENGTH)


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
