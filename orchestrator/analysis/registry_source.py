"""Adapter from the registry (:mod:`orchestrator.registry`) to analysis's :class:`CellResult`.

The registry's API is touched in this module only. A registry that does not exist is not
created just to be read: the sweep is then unknown (``None``), and
:func:`orchestrator.analysis.sources.results` falls back to run folders.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.analysis.frame import CellResult


@dataclass(frozen=True)
class SweepInfo:
    """What the report shows about a sweep besides its cells."""

    name: str
    backend: str
    spec_text: str
    mlflow_experiment_id: str | None
    mlflow_parent_run_id: str | None
    plan: str | None = None  # JSON; read it with orchestrator.grid.plan.stored_plan


def registry_sweep(sweep: str, registry_url: str) -> tuple[SweepInfo, list[CellResult]] | None:
    """The sweep and its cells (by index) from the registry, or ``None`` if it lacks them
    (or there is no registry: reading never creates one)."""
    from orchestrator.registry import Registry, RegistryMissing

    try:
        registry = Registry.open(registry_url, create=False)
    except RegistryMissing:
        return None
    with registry:
        record = registry.find_sweep(sweep)
        if record is None:
            return None
        cells = registry.cells(sweep)
    info = SweepInfo(record.name, record.backend, record.spec_text,
                     record.mlflow_experiment_id, record.mlflow_parent_run_id, record.plan)
    results = [CellResult(
        sweep=sweep, cell_id=c.cell_id, state=str(c.state.value), axes=dict(c.axes),
        final_metrics={k: float(v) for k, v in (c.final_metrics or {}).items()
                       if isinstance(v, int | float)},
        run_dir=c.run_dir, mlflow_run_id=c.mlflow_run_id, stop_reason=c.stop_reason,
    ) for c in cells]
    return info, results
