"""Bounded command-line overrides (docs/spec.md#limits): what Hydra's parser cannot take in
seconds, or at all, is refused before it parses. Its time grows with the square of a list's
length, and deep nesting, long dotted keys or integers of thousands of digits end in a
``RecursionError`` or ``ValueError`` inside it; one linear pass over the text (quoted text
skipped) measures each override against :mod:`orchestrator.limits`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.errors import Problem
from orchestrator.limits import (
    MAX_NUMBER_DIGITS,
    MAX_OVERRIDE_CHARS,
    MAX_OVERRIDE_ITEMS,
    MAX_OVERRIDE_KEY_PARTS,
    MAX_OVERRIDE_NESTING,
    MAX_OVERRIDES,
    MAX_OVERRIDES_CHARS,
)

_FIX = "put large or deep values in the spec file, which has its own limits (docs/spec.md#limits)"


@dataclass(frozen=True)
class _Measure:
    """One override's text measured outside its quotes."""

    items: int = 0  # commas: the items of its lists and mappings, beyond the first of each
    nesting: int = 0  # the most lists, mappings and calls open at once
    digits: int = 0  # the longest run of digits (underscores between them included)


def _measure(text: str) -> _Measure:
    items = depth = nesting = run = digits = 0
    quote: str | None = None
    escaped = False
    for c in text:
        if quote is not None:  # Hydra's quoted text: a backslash escapes the next character
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = None
            continue
        if c.isdigit() or (c == "_" and run):
            run += 1
            digits = max(digits, run)
            continue
        run = 0
        if c in "'\"":
            quote = c
        elif c in "[{(":
            depth += 1
            nesting = max(nesting, depth)
        elif c in "]})":
            depth -= 1
        elif c == ",":
            items += 1
    return _Measure(items, nesting, digits)


def bounds_problems(texts: Sequence[str]) -> list[Problem]:
    """Why ``texts`` (the overrides, in order) are too large to parse: each override's
    bounds, then those of all of them together (empty: within every bound)."""
    def too(where: str, found: str, limit: int, unit: str = "") -> Problem:
        return Problem(where, f"{found}, more than the limit of {limit:,}{unit}",
                       allowed=f"at most {limit:,}", fix=_FIX)

    if len(texts) > MAX_OVERRIDES:
        return [too("overrides", f"{len(texts):,} overrides", MAX_OVERRIDES)]
    problems: list[Problem] = []
    items = 0
    for n, text in enumerate(texts, 1):
        where = f"override {n}"
        if len(text) > MAX_OVERRIDE_CHARS:
            problems.append(too(where, f"{len(text):,} characters", MAX_OVERRIDE_CHARS,
                                " per override"))
            continue
        parts = text.lstrip("+~").split("=", 1)[0].count(".") + 1
        if parts > MAX_OVERRIDE_KEY_PARTS:
            problems.append(too(where, f"a key of {parts:,} dotted parts",
                                MAX_OVERRIDE_KEY_PARTS))
        measure = _measure(text)
        items += measure.items
        if measure.items > MAX_OVERRIDE_ITEMS:
            problems.append(too(where, f"{measure.items:,} list and mapping items (counted by "
                                "their commas)", MAX_OVERRIDE_ITEMS))
        if measure.nesting > MAX_OVERRIDE_NESTING:
            problems.append(too(where, f"lists and mappings nested {measure.nesting:,} deep",
                                MAX_OVERRIDE_NESTING))
        if measure.digits > MAX_NUMBER_DIGITS:
            problems.append(too(where, f"a number of {measure.digits:,} digits",
                                MAX_NUMBER_DIGITS))
    total = sum(len(t) for t in texts)
    if problems:  # the bounds of all together only when no override passes one alone
        return problems
    if total > MAX_OVERRIDES_CHARS:
        problems.append(too("overrides", f"{total:,} characters in all", MAX_OVERRIDES_CHARS))
    if items > MAX_OVERRIDE_ITEMS:
        problems.append(too("overrides", f"{items:,} list and mapping items in all (counted "
                            "by their commas)", MAX_OVERRIDE_ITEMS))
    return problems
