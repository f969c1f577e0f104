"""Adaptive search: Optuna proposes trials, kappa runs them as cells (the ``search:`` block
is :mod:`orchestrator.spec.search_block`; :mod:`.storage` keeps the studies, :mod:`.hook`
takes part in the scheduler loop). Nothing is re-exported: import from each module.
"""
