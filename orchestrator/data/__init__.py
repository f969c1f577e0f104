"""Datasets in verl's parquet format (``kappa data prepare``): one adapter per dataset."""
