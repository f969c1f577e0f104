"""Grids: a spec expanded into cells (:func:`expand`), each named by a hash of its content
(:func:`content_id`), and priced (:func:`plan`); :mod:`orchestrator.grid.plan` also reads
a spec file once into its plan and stores and reads a sweep's ``SweepPlan``."""

from orchestrator.grid.expand import Grid, expand
from orchestrator.grid.identity import Cell, canonical_json, content_id
from orchestrator.grid.plan import Plan, plan

__all__ = ["Cell", "Grid", "Plan", "canonical_json", "content_id", "expand", "plan"]
