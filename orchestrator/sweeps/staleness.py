"""Stale results: a spec's finished cells that other numerics made than the installed ones.

A cell's id hashes its settings, not the code that runs them: after a change to a
backend's numbers (``numerics_version`` bumped, another torch), a resubmitted spec finds
its finished cells under the same ids, and a table would mix their numbers with new ones.
``kappa plan`` and ``kappa submit`` list such cells (recorded provenance against the
installed backend's ``numerics()``; a cell that recorded none predates provenance);
``submit --rerun-stale`` runs exactly them again. By default they are kept: whether a
difference matters is the user's call (docs/spec.md#stale-results).
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.backends import get_backend
from orchestrator.registry import Registry
from orchestrator.runs.provenance import label, stale_against

if TYPE_CHECKING:
    from orchestrator.grid.plan import Plan

#: Stale cell ids printed before "and N more".
SHOWN_IDS = 20


@dataclass(frozen=True)
class StaleCells:
    """A sweep's stale finished cells (grid order), what differs (text -> how many cells)
    and the installed numerics they were compared with (:func:`~.provenance.label`)."""

    sweep: str
    installed: str
    cell_ids: tuple[str, ...] = ()
    differences: Mapping[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.cell_ids)

    def lines(self, rerun_hint: str, rerun: bool = False) -> list[str]:
        """What ``plan`` and ``submit`` print: the stale cells and what differs, then that
        they are kept (``rerun_hint``: the command that reruns them) or (``rerun``) run
        again; with none stale, a line only when ``rerun`` was asked."""
        if not self:
            return [f"nothing stale: every finished cell of {self.sweep} was made by the "
                    f"installed numerics ({self.installed})"] if rerun else []
        n = len(self.cell_ids)
        what = "; ".join(f"{text} ({count} cell{'' if count == 1 else 's'})"
                         for text, count in self.differences.items())
        more = n - SHOWN_IDS
        ids = ", ".join(self.cell_ids[:SHOWN_IDS]) + (f" and {more:,} more" if more > 0 else "")
        head = (f"{n:,} finished cell{' is' if n == 1 else 's are'} stale (made by other "
                f"numerics than the installed {self.installed}): {what}")
        tail = ("they run again, each in a fresh run folder" if rerun else
                f"kept: their results stay as they are; `{rerun_hint}` runs them again")
        return [head, f"  stale: {ids}", tail]

    def as_json(self) -> dict[str, Any]:
        """For ``kappa plan --json``: every stale id, what differs, the installed numerics."""
        return {"count": len(self.cell_ids), "cell_ids": list(self.cell_ids),
                "differences": dict(self.differences), "installed": self.installed}


def rerun_command(spec: str | Path, overrides: Sequence[str] = ()) -> str:
    """The submit that reruns a spec's stale cells, as the user would type it."""
    return f"kappa submit {shlex.join([str(spec), *overrides])} --rerun-stale"


def stale_cells(registry: Registry, sweep: str, cell_ids: Set[str],
                installed: Mapping[str, str]) -> StaleCells:
    """The cells of ``cell_ids`` (a spec's) that succeeded in ``sweep`` with other numerics
    than ``installed`` (a backend's ``numerics()``): one query, each distinct recorded
    numerics judged once."""
    cells, distinct = registry.finished_numerics(sweep)
    judged = [stale_against(made, installed) for made in distinct]
    stale: list[str] = []
    differences: Counter[str] = Counter()
    for cell_id, k in cells:
        if judged[k] and cell_id in cell_ids:
            stale.append(cell_id)
            differences.update(judged[k])
    return StaleCells(sweep, label(installed), tuple(stale), dict(differences.most_common()))


def recorded_stale(registry_url: str | None, plan: Plan) -> StaleCells | None:
    """:func:`stale_cells` of ``plan``'s sweep (every cell it can have, seeds on demand
    included) against its backend installed here, if the registry at ``registry_url``
    exists and records the sweep, else ``None``; creates nothing. An unreadable registry
    is the ``UserInputError`` opening it raises."""
    from orchestrator.sweeps.seed_hook import reachable_ids

    backend = get_backend(plan.spec.backend)
    if (registry := Registry.existing(registry_url)) is None:
        return None
    with registry:
        if registry.find_sweep(plan.spec.name) is None:
            return None
        ids = reachable_ids(backend, plan.sweep_plan(), plan.cells)
        return stale_cells(registry, plan.spec.name, ids, backend.numerics())
