"""Adaptive search: Optuna proposes trials, kappa runs them as cells.

The spec's ``search:`` block is :mod:`orchestrator.spec.search_block`; :mod:`.storage` keeps
the studies beside the registry, and :mod:`.hook` takes part in the scheduler loop
through its hook protocol (:mod:`orchestrator.scheduler.hooks`). Nothing is re-exported
here: import each name from its module.
"""
