"""Analysis of a sweep's results: the results frame, tables, statistics, convergence, plots.

Import the submodules directly (``orchestrator.analysis.frame``, ``.tables``, ``.stats``,
``.convergence``, ``.plots``, ``.report``); this package imports nothing heavy itself.
"""
