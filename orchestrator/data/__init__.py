"""Datasets in verl's parquet format (``kappa data prepare``): one adapter per dataset."""

from orchestrator.data.adapters import DATASETS, DatasetAdapter, Split
from orchestrator.data.prepare import PreparedSplit, approximate_tokens, build_rows, prepare

__all__ = ["DATASETS", "DatasetAdapter", "PreparedSplit", "Split", "approximate_tokens",
           "build_rows", "prepare"]
