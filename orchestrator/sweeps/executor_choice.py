"""Which executor runs a sweep's cells: the ONE place an executor is chosen, from the
command line (``--executor``, ``-E KEY=VALUE``, the ``--ray-address`` shortcut) completed
from what the sweep used last and validated once (:func:`choose_executor`), or for
``kappa cancel`` from a job's id (:func:`choice_for_job`).

``-E`` values are strings the ``Options`` model converts (``4`` to an int, ``0,1`` to a
list where the option says so); one starting with ``[`` or ``{`` is JSON. Options handed
over in ``KAPPA_EXECUTOR_OPTIONS`` (a background scheduler's) come first, the command
line's win, a key given twice: the last. They travel in one environment variable (Linux
caps one at 128 KiB) and are kept with the sweep: at most :data:`MAX_OPTIONS_CHARS` of JSON.

The registry is shared by a team: a password in an option is stored masked, and an option
still masked when used is refused with the fix (give it again), never sent as ``***``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator import configuration
from orchestrator.errors import Problem, UserInputError
from orchestrator.executors import (
    OPTIONS_ENV,
    Executor,
    ExecutorOptions,
    executor_options,
    make_executor,
    validate_options,
    with_option,
)
from orchestrator.redact import MASK, redact
from orchestrator.registry import Registry
from orchestrator.sweeps.stores import Stores

MAX_OPTIONS_CHARS = 64 * 1024


@dataclass(frozen=True)
class ExecutorChoice:
    """A registered executor's ``name`` (``None``: what the sweep used last, else local),
    its ``options``, and ``shortcuts``: command-line shortcuts' options keyed by the one
    executor they are for (:func:`ray_shortcut`; ``None``: not given)."""

    name: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    shortcuts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The options validated (by :func:`choose_executor`): what :meth:`make` builds from.
    valid: ExecutorOptions | None = field(default=None, compare=False, repr=False)

    def _all_options(self) -> dict[str, Any]:
        return {**shortcut_options(self.name or "local", self.shortcuts), **self.options}

    def make(self, max_parallel: int | None = None) -> Executor:
        """Build the executor from the validated options (an unchecked choice's validated
        here; a ray_jobs one connects to its cluster here); ``max_parallel``
        (``--max-parallel``) wins over the options' own."""
        name = self.name or "local"
        valid = self.valid if self.valid is not None else validate_options(
            name, self._all_options())
        if max_parallel is not None and "max_parallel" in type(valid).model_fields:
            valid = with_option(name, valid, "max_parallel", max_parallel)
        return make_executor(name, valid)

    def cli_args(self) -> list[str]:
        """The choice's name as ``kappa resume`` options (its options go in :meth:`env`)."""
        return ["--executor", self.name] if self.name else []

    def env(self) -> dict[str, str]:
        """The choice's options (its executor's ``shortcuts`` included) for a
        ``kappa`` process started from here, which reads them as ``-E`` options."""
        options = self._all_options() if self.name else dict(self.options)
        return {OPTIONS_ENV: json.dumps(options)} if options else {}


def shortcut_options(name: str, shortcuts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The options executor ``name``'s own shortcuts give (``None``: not given)."""
    return {k: v for k, v in shortcuts.get(name, {}).items() if v is not None}


def remembered_executor(sweep: str, registry: Registry | Stores | None = None) -> ExecutorChoice:
    """The executor ``sweep`` last ran on, as its registry (default: the usual one) records
    it, passwords masked; an empty choice if none was recorded or there is no registry."""
    if not isinstance(registry, Registry):
        try:
            opened = (registry or Stores()).open_registry(create=False)
        except UserInputError:  # no registry yet (or one to upgrade first): nothing known
            return ExecutorChoice()
        with opened:
            return remembered_executor(sweep, opened)
    stored = registry.executor(sweep) if registry.find_sweep(sweep) is not None else None
    return ExecutorChoice() if stored is None else ExecutorChoice(stored[0], stored[1])


def choose_executor(sweep: str, choice: ExecutorChoice | None = None,
                    registry: Registry | Stores | None = None) -> ExecutorChoice:
    """``choice`` completed from what ``sweep`` last used with the same executor (else
    local), the options given winning; checked (UserInputError, e.g. ray_jobs without an
    address, or a remembered password not given again); writes nothing."""
    given = choice or ExecutorChoice()
    last = remembered_executor(sweep, registry)
    name = given.name or last.name or "local"
    kept = last.options if last.name == name else {}
    options = {**kept, **shortcut_options(name, given.shortcuts), **given.options}
    check_unmasked(sweep, name, options)
    valid = validate_options(name, options)  # connects to nothing
    return ExecutorChoice(name, valid.model_dump(mode="json", exclude_unset=True), valid=valid)


def remember_executor(sweep: str, chosen: ExecutorChoice,
                      registry: Registry | Stores | None = None) -> None:
    """Record ``chosen`` in the sweep's registry for its next scheduler, ``resume`` and
    ``cancel``, on any machine sharing it (passwords masked; a no-op when unchanged)."""
    if not isinstance(registry, Registry):
        with (registry or Stores()).open_registry() as opened:
            remember_executor(sweep, chosen, opened)
        return
    name, stored = chosen.name or "local", storable(chosen.options)
    if remembered_executor(sweep, registry) != ExecutorChoice(name, stored):
        registry.set_executor(sweep, name, stored)


def ray_shortcut(ray_address: str | None) -> dict[str, dict[str, Any]]:
    """``--ray-address`` (or ``RAY_ADDRESS``) as a shortcut of the ray_jobs executor only:
    another executor with an ``address`` option must never get the Ray cluster's URL."""
    return {"ray_jobs": {"address": ray_address}}


def choice_for_job(sweep: str, name: str, registry: Registry,
                   options: Mapping[str, Any] | None = None,
                   shortcuts: Mapping[str, Mapping[str, Any]] | None = None) -> ExecutorChoice:
    """Executor ``name`` (a job's id names it) as ``kappa cancel`` makes it: completed by
    :func:`choose_executor`, given those of the ``-E`` ``options`` it has."""
    given = ExecutorChoice(name, executor_options(name, **(options or {})), shortcuts or {})
    return choose_executor(sweep, given, registry)


# -- the command line's -E options ---------------------------------------------------
def parse_executor_options(pairs: Iterable[str]) -> dict[str, Any]:
    """``["max_parallel=4", "gpus=[0, 1]"]`` -> ``{"max_parallel": "4", "gpus": [0, 1]}``,
    over the handed-over ones; every malformed pair is a problem of one UserInputError."""
    options: dict[str, Any] = dict(configuration.read(OPTIONS_ENV) or {})
    problems: list[Problem] = []
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


# -- remembered per sweep, passwords masked -------------------------------------------
def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v) for v in value]
    return value


def storable(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as the registry keeps them: every password masked."""
    return {k: _masked(v) for k, v in options.items()}


def is_masked(value: Any) -> bool:
    """Whether ``value`` holds a password that :func:`storable` masked."""
    if isinstance(value, Mapping):
        return any(is_masked(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(is_masked(v) for v in value)
    if not isinstance(value, str) or MASK not in value:
        return False
    probe = value.replace(MASK, "x")
    return redact(probe) != probe


def check_unmasked(sweep: str, name: str, options: Mapping[str, Any]) -> None:
    """Refuse options whose password the registry could not keep (UserInputError)."""
    masked = sorted(k for k, v in options.items() if is_masked(v))
    if masked:
        raise UserInputError(
            f"the {name} executor of sweep {sweep} needs a password kappa does not store",
            [Problem(f"executor.{key}", "remembered with its password masked (the "
                     "registry is shared, so passwords stay out of it)",
                     found=str(options[key]),
                     fix=f"give it again: `-E {key}=...`"
                     + (" or --ray-address / RAY_ADDRESS" if key == "address" else ""))
             for key in masked])
