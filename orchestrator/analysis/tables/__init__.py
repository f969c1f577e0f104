"""Ablation tables: describe (:class:`TableSpec`), build (:func:`build_table`), render."""

from orchestrator.analysis.tables.build import AVERAGE, build_table
from orchestrator.analysis.tables.model import Table, TableBlock, TableCell, TableRow
from orchestrator.analysis.tables.render import RENDERERS, render
from orchestrator.analysis.tables.spec import DeltaSpec, TableSpec

__all__ = ["AVERAGE", "RENDERERS", "DeltaSpec", "Table", "TableBlock", "TableCell", "TableRow",
           "TableSpec", "build_table", "render"]
