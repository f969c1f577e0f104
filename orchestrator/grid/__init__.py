"""Grids: a spec expanded into cells, each named by a hash of its content.

Public API (stable; the scheduler and registry build on it):

* :func:`expand` ``(spec) -> Grid``; ``Grid.cells`` is a tuple of :class:`Cell`
  (``index``, ``cell_id``, ``axes``, ``labels``, ``settings``) and ``Grid.by_id`` maps ids
  to cells.
* :func:`plan` ``(spec) -> Plan`` adds the cost: ``count``, ``resources``, ``gpu_hours``
  and ``to_dict()``; :mod:`orchestrator.grid.plan` also reads a spec file once into its
  plan (``load_plan``) and stores and reads a sweep's :class:`SweepPlan`.
* :func:`content_id` and :func:`canonical_json` define cell ids.
"""

from orchestrator.grid.cell import Cell, canonical_json, content_id
from orchestrator.grid.expand import Grid, expand
from orchestrator.grid.plan import Plan, plan

__all__ = ["Cell", "Grid", "Plan", "canonical_json", "content_id", "expand", "plan"]
