"""Errors meant for people. Every error a user can fix (a bad spec, an unknown name, a
registry that needs a migration) is a :class:`UserInputError`: the CLI prints it compactly
and exits with code 2 (``KAPPA_FULL_ERROR=1``: the full traceback). Rendered errors never
show a password (:mod:`orchestrator.redact`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from orchestrator.redact import lines_shown, redact


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the user's input, located as precisely as we can.

    ``location`` is a dotted path into the input (``axes.kappa.k200.kl_coef``);
    ``file``/``line``/``column`` (1-based) point into the source file when known."""

    location: str
    message: str
    found: str | None = None
    allowed: str | None = None
    fix: str | None = None
    file: str | None = None
    line: int | None = None
    column: int | None = None

    def render(self) -> str:
        where = ""
        if self.file:  # file:line:column (a column only after a line)
            shown = (self.line, self.column) if self.line is not None else ()
            where = ":".join([self.file, *(str(n) for n in shown if n is not None)]) + ": "
        text = f"{where}{self.location}: {self.message}" if self.location else where + self.message
        for label, value in (("found:", self.found), ("allowed:", self.allowed),
                             ("fix:", self.fix)):
            if value is not None:
                text += f"\n    {label:<8} {value}"
        return lines_shown(text)  # a quoted name is shown, never obeyed


class KappaError(Exception):
    """Base class of every error kappa raises on purpose."""


class UserInputError(KappaError):
    """Input the user can fix. Carries every problem found, not just the first."""

    exit_code = 2

    def __init__(self, summary: str, problems: Sequence[Problem] = ()) -> None:
        self.summary = summary
        self.problems = tuple(problems)
        super().__init__(self.render())

    def render(self) -> str:
        """The summary and every problem, any password in them masked."""
        if not self.problems:
            return redact(lines_shown(self.summary))
        lines = [f"{lines_shown(self.summary)} ({len(self.problems)} problem(s)):"]
        lines += ["  - " + p.render().replace("\n", "\n    ") for p in self.problems]
        return redact("\n".join(lines))


def unknown_name(kind: str, name: str, known: Iterable[str], location: str = "") -> UserInputError:
    """The error for a name missing from a registry: it lists the known names.

    >>> unknown_name("advantage", "grop", ["grpo", "drgrpo"]).summary
    "unknown advantage 'grop'; known: drgrpo, grpo"
    """
    known_sorted = sorted(known)
    close = difflib.get_close_matches(name, known_sorted, n=1)
    fix = f"did you mean '{close[0]}'?" if close else None
    msg = f"unknown {kind} '{name}'; known: {', '.join(known_sorted)}"
    if location or fix:
        return UserInputError(msg, [Problem(location, f"unknown {kind}", found=repr(name),
                                            allowed=", ".join(known_sorted), fix=fix)])
    return UserInputError(msg)
