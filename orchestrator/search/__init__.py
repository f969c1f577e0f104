"""Adaptive search: Optuna proposes trials, kappa runs them as cells (the ``search:`` block is
:mod:`orchestrator.spec.search_block`; :mod:`.hook` keeps the studies and takes part in the
scheduler loop). Nothing is re-exported: import from each module."""
