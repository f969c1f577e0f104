"""Names as the papers print them, metric globs, and matching CLI values to axis values."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from orchestrator.spec.yaml_source import cli_value

# Baseline values as Table 2 prints them; other values are shown as they are.
VALUE_DISPLAY: dict[str, str] = {"grpo": "GRPO", "drgrpo": "DrGRPO", "gspo": "GSPO", "dapo": "DAPO",
                                  "clip_cov": "ClipCov", "kl_cov": "KLCov", "reward_budget": "RB"}

# Axis names as column headers / delta-row labels.
AXIS_DISPLAY: dict[str, str] = {"baseline": "Method", "reward_budget": "RB", "use_kl_loss": "KL",
                                 "model": "Model"}


def display_value(value: Any) -> str:
    """How an axis value is printed in a row label."""
    return VALUE_DISPLAY.get(value, value) if isinstance(value, str) else str(value)


def display_axis(name: str) -> str:
    """How an axis name is printed as a header."""
    return AXIS_DISPLAY.get(name, name)


def delta_label(axis: str, value: Any, only_treatment: bool) -> str:
    """``+ RB`` for the single ``True`` treatment of a boolean axis, else ``+ RB=value``."""
    short = display_axis(axis)
    return f"+ {short}" if only_treatment and value is True else f"+ {short}={display_value(value)}"


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a metric glob whose ``*`` parts are captured (``*`` spans ``/`` too)."""
    parts = [re.escape(p) for p in pattern.split("*")]
    return re.compile("^" + "(.+?)".join(parts) + "$")


def match_metrics(globs: Sequence[str], available: Sequence[str]) -> list[tuple[str, str]]:
    """``(metric, header)`` for every available metric matching any glob, in order; the
    header is what the wildcards matched (``amc23`` for ``eval/*/mean@8``), or the full name
    when a glob has no wildcard or two metrics would get the same header."""
    found: dict[str, str] = {}
    for pattern in globs:
        rx = glob_regex(pattern)
        for name in available:
            if (m := rx.match(name)) is not None:
                found.setdefault(name, "/".join(m.groups()) or name)
    if len(set(found.values())) != len(found):
        return [(name, name) for name in found]
    return list(found.items())


_EVAL_AT_K = re.compile(r"^eval/[^/]+/(mean|pass)@(\d+)$")
VAL_CORE_GLOB = "val-core/*/acc/mean@1"


def default_metric_glob(available: Sequence[str]) -> str | None:
    """The columns a table shows when none are asked for: ``eval/*/mean@k`` for the k most
    runs logged (the larger k on a tie), else ``eval/*/pass@k`` likewise, else the
    validation accuracy ``val-core/*/acc/mean@1``; ``None`` when there is none of these.

    >>> default_metric_glob(["eval/a/mean@4", "eval/b/mean@4", "eval/a/pass@4"])
    'eval/*/mean@4'
    """
    for family in ("mean", "pass"):
        ks = Counter(m.group(2) for name in available
                     if (m := _EVAL_AT_K.match(name)) and m.group(1) == family)
        if ks:
            k = max(ks, key=lambda key: (ks[key], int(key)))
            return f"eval/*/{family}@{k}"
    rx = glob_regex(VAL_CORE_GLOB)
    return VAL_CORE_GLOB if any(rx.match(name) for name in available) else None


def value_matches(value: Any, text: str) -> bool:
    """Whether an axis value equals the CLI text ``text`` (typed or as written)."""
    parsed = cli_value(text)
    if isinstance(value, bool) or isinstance(parsed, bool):
        return isinstance(value, bool) and isinstance(parsed, bool) and value == parsed
    return bool(value == parsed) or str(value) == text
