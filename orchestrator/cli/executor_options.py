"""``-E KEY=VALUE``: executor options from the command line.

A value is a string, which the executor's ``Options`` model converts (``4`` to an int,
``true`` to a bool, ``0,1`` to a list where the option says so); a value that starts
with ``[`` or ``{`` is JSON. Options a parent process handed over in
``KAPPA_EXECUTOR_OPTIONS`` (a background scheduler's, see ``ExecutorChoice.env``) come
first; those on the command line win, and of one key given twice on the command line
(``-E max_parallel=2 -E max_parallel=8``) the last wins, as with any repeated option, so
a script can append an override to a fixed list.

Options travel to a background scheduler in one environment variable, which Linux caps
at 128 KiB (``MAX_ARG_STRLEN``), and are kept with the sweep in the registry: all of a
command line's options together may take :data:`MAX_OPTIONS_CHARS` as JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from orchestrator.errors import Problem, UserInputError
from orchestrator.executors import OPTIONS_ENV

MAX_OPTIONS_CHARS = 64 * 1024


def parse_executor_options(pairs: Iterable[str]) -> dict[str, Any]:
    """``["max_parallel=4", "gpus=[0, 1]"]`` -> ``{"max_parallel": "4", "gpus": [0, 1]}``,
    over the handed-over ones; every malformed pair is a problem of one UserInputError."""
    options: dict[str, Any] = {}
    problems: list[Problem] = []
    handed = os.environ.get(OPTIONS_ENV)
    if handed:
        try:
            loaded = json.loads(handed)
        except (ValueError, RecursionError):
            loaded = None
        if not isinstance(loaded, dict):
            problems.append(Problem(OPTIONS_ENV, "not a JSON object", found=handed[:80],
                                    fix=f"unset {OPTIONS_ENV} (kappa sets it for the "
                                        "schedulers it starts)"))
        else:
            options.update(loaded)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            problems.append(Problem("executor", "an executor option is KEY=VALUE",
                                    found=pair, fix="e.g. -E max_parallel=4"))
            continue
        if value.lstrip().startswith(("[", "{")):
            try:
                options[key] = json.loads(value)
            except RecursionError:
                problems.append(Problem(f"executor.{key}", "JSON nested too deeply",
                                        found=value[:80], fix="give a flat list or mapping"))
            except ValueError as exc:
                problems.append(Problem(f"executor.{key}", f"not valid JSON: {exc}",
                                        found=value[:200],
                                        fix='e.g. -E gpus=["0","1"] or -E gpus=0,1'))
            continue
        options[key] = value
    if not problems:
        size = len(json.dumps(options))
        if size > MAX_OPTIONS_CHARS:
            largest = max(options, key=lambda k: len(json.dumps(options[k])))
            problems.append(Problem(
                f"executor.{largest}", f"the executor options take {size} characters as "
                f"JSON, over {MAX_OPTIONS_CHARS}", found=f"{str(options[largest])[:60]}...",
                fix="give a shorter value (options are kept with the sweep and passed to "
                    "its scheduler in one environment variable)"))
    if problems:
        raise UserInputError("bad --executor-option", problems)
    return options


__all__ = ["OPTIONS_ENV", "parse_executor_options"]
