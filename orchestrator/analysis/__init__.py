"""Analysis of a sweep's results: the results frame, tables, statistics, plots, the report.

Import the submodules directly; this package imports nothing heavy itself."""
