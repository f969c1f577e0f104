"""The scheduler: :class:`~.loop.SweepScheduler` drives one sweep over any Backend, Executor and
RunTracker, with stopping and search as its hooks (:mod:`.hooks`); the user's verbs that build it
live in :mod:`orchestrator.sweeps`. Nothing is re-exported here: import each name from its module.
"""
