"""Every ``KAPPA_*`` environment variable kappa reads, declared once in :data:`VARIABLES`
(its kind, default, bounds and meaning), and :func:`read`, the one way to read one.

A value is parsed each time it is read, never cached (the environment may change between
calls, in tests above all). An empty value (or only spaces) is unset; a bad one is a
:class:`UserInputError` (exit 2) naming the variable, the value, what is allowed and the
fix, never a silent default. Every command and verl job checks them all before it starts
anything (:func:`check_environment`), so a bad value is refused where the user sees it, not
later in a background scheduler or a job. docs/configuration.md lists the table;
tests/unit/test_configuration_doc.py keeps the two equal.

Two readers stay outside: the job wrapper runs isolated on the standard library only
(``executors/job_wrapper.py`` reads ``KAPPA_RUN_LOCK_WAIT`` itself, checked here by the
command that started the job), and the verl plug-in, in verl's processes, reads the
``KAPPA_ENTROPY_REWARD_*`` variables kappa sets for it."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from orchestrator.errors import Problem, UserInputError
from orchestrator.limits import DEFAULT_MAX_CELLS, INT32_MAX, MAX_WAIT_S, number_problem
from orchestrator.redact import redact


class Kind(StrEnum):
    """How a variable's text is read."""

    NUMBER = "number"  # a finite float in low .. high
    WHOLE = "whole number"  # digits (``_`` allowed), in low .. high
    FLAG = "flag"  # on/off
    TEXT = "text"  # a path, URL or name: taken as it is
    COMMAND = "command"  # split as a shell would
    JSON = "JSON object"


ON = frozenset({"1", "on", "true", "yes"})
OFF = frozenset({"0", "off", "false", "no"})
# Not in a TEXT value (nor a sweep name, paths.check_name): control characters, and lone
# surrogates (bytes that are not UTF-8, which no store, file name or terminal can encode).
NOT_TEXT = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


@dataclass(frozen=True)
class Variable:
    """One variable: what unset means (``default``; ``None`` where the reader derives it,
    which ``shown`` then says) and what a value may be."""

    kind: Kind
    default: Any
    meaning: str  # one line: docs/configuration.md's and the error's words
    low: float = 0.0
    high: float = MAX_WAIT_S
    low_open: bool = False  # above ``low``, not at it
    shown: str | None = None  # the default as the docs show it, where not the value itself
    set_by_kappa: bool = False  # kappa sets it for the processes it starts

    @property
    def allowed(self) -> str:
        """What a value may be, in words (the error's and the docs' "allowed")."""
        if self.kind is Kind.NUMBER:
            return (f"a number > {self.low:g} and <= {self.high:,g}" if self.low_open
                    else f"a number in {self.low:g} .. {self.high:,g}")
        if self.kind is Kind.WHOLE:
            return f"a whole number in {int(self.low):,} .. {int(self.high):,}"
        return {Kind.FLAG: "on or off (or 1/0, true/false, yes/no)",
                Kind.TEXT: "UTF-8 text without control characters",
                Kind.COMMAND: "a command line, quoted as a shell would",
                Kind.JSON: "a JSON object"}[self.kind]

    @property
    def shown_default(self) -> str:
        """The default as docs/configuration.md shows it."""
        if self.shown is not None:
            return self.shown
        if self.kind is Kind.FLAG:
            return "on" if self.default else "off"
        if self.kind is Kind.WHOLE:
            return f"{self.default:,}"
        return "unset" if self.default is None else f"{self.default:,g}"


def _seconds(default: float, meaning: str, low: float = 0.0, *,
             low_open: bool = False) -> Variable:
    """A duration: seconds in ``low`` .. a day (:data:`~orchestrator.limits.MAX_WAIT_S`)."""
    return Variable(Kind.NUMBER, default, meaning, low, MAX_WAIT_S, low_open)


#: Every variable kappa reads, by name (docs/configuration.md, in this order).
VARIABLES: dict[str, Variable] = {
    # -- stores --
    "KAPPA_HOME": Variable(Kind.TEXT, ".kappa", "the state folder",
                           shown="`.kappa` (relative to the working directory)"),
    "KAPPA_CACHE": Variable(Kind.TEXT, None, "the cache folder (warm starts, verl preflight)",
                            shown="`$KAPPA_HOME/cache`"),
    "KAPPA_REGISTRY": Variable(Kind.TEXT, None, "the registry's SQLAlchemy URL",
                               shown="`sqlite:///$KAPPA_HOME/registry.db`"),
    "KAPPA_MLFLOW_URI": Variable(Kind.TEXT, None, "the MLflow tracking URI",
                                 shown="`sqlite:///$KAPPA_HOME/mlflow.db`"),
    # -- limits and errors --
    "KAPPA_MAX_CELLS": Variable(Kind.WHOLE, DEFAULT_MAX_CELLS, "the most cells a grid may have",
                                1, INT32_MAX),
    "KAPPA_FULL_ERROR": Variable(Kind.FLAG, False, "print an error you can fix with its "
                                                   "full traceback"),
    # -- scheduling (seconds) --
    "KAPPA_POLL_INTERVAL": _seconds(0.5, "how often the scheduler loop looks at its cells",
                                    low_open=True),
    "KAPPA_RETRY_BACKOFF": _seconds(5.0, "the first wait before a failed cell is retried"),
    "KAPPA_LEASE_SECONDS": _seconds(30.0, "how long a scheduler's lease lasts without a "
                                          "heartbeat", 0.5),
    "KAPPA_HOST_ID": Variable(Kind.TEXT, None, "which host a lease holder's pid belongs to",
                              shown="the boot id and pid namespace"),
    "KAPPA_RUN_LOCK_WAIT": _seconds(600.0, "how long a relaunched job waits for the run "
                                           "folder's lock"),
    "KAPPA_CLI": Variable(Kind.COMMAND, None, "the command a background scheduler starts with",
                          shown="`python -m orchestrator`"),
    "KAPPA_NOTIFY_TIMEOUT": _seconds(5.0, "how long one notification POST may take",
                                     low_open=True),
    "KAPPA_NOTIFY_WAIT": _seconds(10.0, "how long an ending scheduler waits for its "
                                        "notifications"),
    # -- MLflow (seconds) --
    "KAPPA_STORE_RETRY_SECONDS": _seconds(300.0, "how long writes to an unreachable MLflow "
                                                 "store are retried"),
    "KAPPA_METRICS_FLUSH_SECONDS": _seconds(60.0, "how long a finishing trainer waits for "
                                                  "MLflow to take its metrics"),
    "KAPPA_MLFLOW_SUMMARY": Variable(Kind.FLAG, True, "attach the tables, report and deltas "
                                                      "to the sweep's MLflow run at its end"),
    # -- verl --
    "KAPPA_VERL_PREFLIGHT": Variable(Kind.FLAG, True, "compose every verl cell before a submit"),
    "KAPPA_VERL_POLL_SECONDS": _seconds(5.0, "how often a verl cell's driver refreshes its "
                                             "progress", low_open=True),
    # -- set by kappa for its own processes --
    "KAPPA_EXECUTOR_OPTIONS": Variable(Kind.JSON, None, "a background scheduler's -E options",
                                       set_by_kappa=True),
    "KAPPA_EXECUTOR": Variable(Kind.TEXT, None, "the executor that runs a job",
                               set_by_kappa=True),
    "KAPPA_SECRET_ENV_FILE": Variable(Kind.TEXT, None, "the file of a Ray job's secret "
                                                       "variables", set_by_kappa=True),
}


def read(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """``name``'s value in ``environ`` (default ``os.environ``), parsed as :data:`VARIABLES`
    declares it: a float, int, bool, str, list of arguments (``COMMAND``) or dict
    (``JSON``); its default when unset or empty. UserInputError: a bad value. KeyError: a
    name not in the table (a bug)."""
    variable = VARIABLES[name]
    raw = (os.environ if environ is None else environ).get(name, "")
    if not raw.strip():
        return variable.default
    value = _parse(variable.kind, raw)
    if variable.kind in (Kind.NUMBER, Kind.WHOLE) and value is not None and number_problem(
            value, name, variable.low, variable.high, low_open=variable.low_open):
        value = None  # out of bounds
    if value is None:
        raise UserInputError(f"bad environment variable {name}", [_problem(name, variable, raw)])
    return value


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Read every variable of the table: one UserInputError listing every bad one."""
    problems: list[Problem] = []
    for name in VARIABLES:
        try:
            read(name, environ)
        except UserInputError as exc:
            problems += exc.problems
    if problems:
        raise UserInputError("bad environment variables", problems)


def _parse(kind: Kind, raw: str) -> Any:
    """``raw`` as ``kind`` reads it (bounds not checked yet); ``None``: not readable so."""
    text = raw.strip()
    if kind is Kind.NUMBER:
        try:
            value = float(text)
        except ValueError:
            return None  # ASCII only, below: float() takes other scripts' digits ("５")
        return value if text.isascii() and math.isfinite(value) else None
    if kind is Kind.WHOLE:
        digits = text.replace("_", "")
        ok = digits.isascii() and digits.isdigit() and len(digits) <= 10 and text[0] != "_"
        return int(digits) if ok else None
    if kind is Kind.FLAG:
        word = text.lower()
        return word in ON if word in ON | OFF else None
    if kind is Kind.TEXT:
        return None if NOT_TEXT.search(raw) else raw
    if kind is Kind.COMMAND:
        try:
            return shlex.split(text)
        except ValueError:  # an unclosed quote or a trailing escape
            return None
    try:
        loaded = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _problem(name: str, variable: Variable, raw: str) -> Problem:
    if variable.set_by_kappa:
        fix = "unset it: kappa sets it for the processes it starts"
    elif variable.kind in (Kind.NUMBER, Kind.WHOLE):
        fix = (f"unset it (default {variable.shown_default}), or set e.g. "
               f"{name}={variable.shown_default.replace(',', '')}")
    else:
        fix = f"unset it (default: {variable.shown_default}), or set a value as allowed"
    # Masked before it is cut, so that no part of a password in a URL can show.
    return Problem(name, f"not a valid value for {variable.meaning}",
                   found=repr(redact(raw)[:80]), allowed=variable.allowed, fix=fix)
