"""Which executor runs a sweep's cells (:class:`ExecutorChoice`), and how a sweep keeps
it: the executor a sweep last ran on is remembered in its registry
(:mod:`.executor_memory`, passwords masked), so ``resume`` on any machine sharing the
registry keeps using it.

A command-line shortcut for one executor's option (``--ray-address`` / ``RAY_ADDRESS``
for ray_jobs) is keyed by that executor's name and reaches no other executor, whatever
its options are called.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import UserInputError
from orchestrator.executors import (
    OPTIONS_ENV,
    Executor,
    executor_options,
    get_executor,
    validate_options,
)
from orchestrator.registry import Registry
from orchestrator.scheduler.stores import Stores


@dataclass(frozen=True)
class ExecutorChoice:
    """Which executor runs a sweep's cells: a registered executor's ``name`` and its
    ``options`` (validated against its ``Options`` model). A ``None`` name means "what the
    sweep used last, else local" (see :func:`choose_executor`).

    ``shortcuts`` are options given through a command-line shortcut that belongs to ONE
    executor, keyed by that executor's name (``{"ray_jobs": {"address": URL}}`` from
    ``--ray-address`` / ``RAY_ADDRESS``): used only when that executor is the one chosen,
    never handed to another executor that happens to have an option of the same name
    (a plug-in's ``address`` must not receive the Ray cluster's URL). ``None`` values
    count as not given.
    """

    name: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    shortcuts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def _all_options(self, max_parallel: int | None = None) -> dict[str, Any]:
        name = self.name or "local"
        return {**shortcut_options(name, self.shortcuts), **self.options,
                **executor_options(name, max_parallel=max_parallel)}

    def make(self, max_parallel: int | None = None) -> Executor:
        """Build the executor (a ray_jobs one connects to its cluster here);
        ``max_parallel`` (``--max-parallel``) wins over the options' own."""
        return get_executor(self.name or "local", **self._all_options(max_parallel))

    def check(self) -> ExecutorChoice:
        """This choice with its options validated and normalised (``shortcuts`` folded
        in); UserInputError for an unknown name or a bad or missing option. Connects to
        nothing."""
        name = self.name or "local"
        valid = validate_options(name, self._all_options())
        return ExecutorChoice(name, valid.model_dump(mode="json", exclude_unset=True))

    def cli_args(self) -> list[str]:
        """The choice's name as ``kappa resume`` options (its options go in :meth:`env`)."""
        return ["--executor", self.name] if self.name else []

    def env(self) -> dict[str, str]:
        """The choice's options (its executor's ``shortcuts`` included) for a
        ``kappa`` process started from here, which reads them as ``-E`` options."""
        options = self._all_options() if self.name else dict(self.options)
        return {OPTIONS_ENV: json.dumps(options)} if options else {}


def shortcut_options(name: str, shortcuts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The options that executor ``name``'s own shortcuts give (``None`` = not given);
    shortcuts of other executors are none of its business."""
    return {k: v for k, v in shortcuts.get(name, {}).items() if v is not None}


def remembered_executor(sweep: str, registry: Registry | Stores | None = None) -> ExecutorChoice:
    """The executor ``sweep`` last ran on, as its registry (``registry``, else the
    default one) records it; an empty choice if none was recorded or there is no
    registry yet. A password in its options comes back masked (:mod:`.executor_memory`)."""
    from orchestrator.scheduler.executor_memory import recall

    if not isinstance(registry, Registry):
        try:
            opened = (registry or Stores()).open_registry(create=False)
        except UserInputError:  # no registry yet (or one to upgrade first): nothing known
            return ExecutorChoice()
        with opened:
            return remembered_executor(sweep, opened)
    stored = recall(registry, sweep)
    return ExecutorChoice() if stored is None else ExecutorChoice(stored[0], stored[1])


def choose_executor(sweep: str, choice: ExecutorChoice | None = None,
                    registry: Registry | Stores | None = None) -> ExecutorChoice:
    """``choice`` completed from what ``sweep`` last used (else local): the options the
    sweep last used with the same executor (from ``registry``), overridden by those
    given; checked (UserInputError, e.g. ray_jobs without an address, or a remembered
    password not given again); writes nothing."""
    from orchestrator.scheduler.executor_memory import check_unmasked

    given = choice or ExecutorChoice()
    last = remembered_executor(sweep, registry)
    name = given.name or last.name or "local"
    kept = last.options if last.name == name else {}
    options = {**kept, **shortcut_options(name, given.shortcuts), **given.options}
    check_unmasked(sweep, name, options)
    return ExecutorChoice(name, options).check()


def remember_executor(sweep: str, chosen: ExecutorChoice,
                      registry: Registry | Stores | None = None) -> None:
    """Record ``chosen`` in the sweep's registry for its next scheduler, ``resume`` and
    ``cancel``, on any machine sharing it (passwords masked: :mod:`.executor_memory`)."""
    from orchestrator.scheduler.executor_memory import remember

    if not isinstance(registry, Registry):
        with (registry or Stores()).open_registry() as opened:
            remember_executor(sweep, chosen, opened)
        return
    remember(registry, sweep, chosen.name or "local", chosen.options)


__all__ = ["ExecutorChoice", "choose_executor", "remember_executor", "remembered_executor",
           "shortcut_options"]
