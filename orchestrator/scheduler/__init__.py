"""The scheduler loop: moves one sweep's cells through their states until none is left.

:class:`~.loop.SweepScheduler` (:mod:`.loop`) drives a sweep over any Backend, Executor and
RunTracker; stopping and search take part as its hooks (both protocols: :mod:`.hooks`). The user's
verbs (submit, resume, cancel, canary) that build it live in :mod:`orchestrator.sweeps`. Nothing is
re-exported here: import each name from its module.
"""
