"""The error of ``orchestrator.algorithms``: an unknown name, option or setting. A ``ValueError``
(what verl's plug-in expects); each :class:`Issue` has the fields of
:class:`orchestrator.errors.Problem`, so a command can report it as a ``UserInputError``."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Issue:
    """One problem with an algorithm's input: where, what, and what would be accepted."""

    location: str
    message: str
    found: str | None = None
    allowed: str | None = None
    fix: str | None = None


class AlgorithmError(ValueError):
    """Input an algorithm refuses; carries every issue found, not just the first."""

    def __init__(self, summary: str, issues: Sequence[Issue] = ()) -> None:
        self.summary = summary
        self.issues = tuple(issues)
        super().__init__("; ".join([summary, *(f"{i.location}: {i.message}" for i in issues)]))


def unknown_options(location: str, kind: str, options: Iterable[str],
                    allowed: Sequence[str]) -> list[Issue]:
    """One issue per option not in ``allowed`` (in name order), naming the allowed ones."""
    return [Issue(f"{location}.{opt}", f"not an option of {kind}", found=repr(opt),
                  allowed=", ".join(allowed) or "(none)")
            for opt in sorted(set(options) - set(allowed))]


def unknown_name(kind: str, name: str, known: Iterable[str], location: str) -> AlgorithmError:
    """The error for a name missing from a registry: it lists the known names.

    >>> unknown_name("advantage", "grop", ["grpo", "drgrpo"], "advantage").summary
    "unknown advantage 'grop'; known: drgrpo, grpo"
    """
    known_sorted = sorted(known)
    close = difflib.get_close_matches(name, known_sorted, n=1)
    return AlgorithmError(f"unknown {kind} '{name}'; known: {', '.join(known_sorted)}", [Issue(
        location, f"unknown {kind}", found=repr(name), allowed=", ".join(known_sorted),
        fix=f"did you mean '{close[0]}'?" if close else None)])
