"""Stopping cells early, and the sweep's GPU-hours cap.

The spec's ``stop:`` block is :mod:`orchestrator.spec.stop_block`; :mod:`.rules` judges a
cell's metric history against it, :mod:`.budget` prices cells against the cap, and
:mod:`.hook` takes part in the scheduler loop through its hook protocol
(:mod:`orchestrator.scheduler.hooks`). Nothing is re-exported here: import each name
from its module.
"""
