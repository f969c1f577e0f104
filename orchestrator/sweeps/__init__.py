"""The user's verbs on a sweep: submit, resume, cancel, canary.

Each lives in its own module and is imported from there (this package re-exports
nothing): :mod:`.submission` (validate a spec, record the sweep), :mod:`.driver`
(``submit`` and ``resume``: drive a sweep here), :mod:`.detached` (a background
scheduler), :mod:`.cancelling`, :mod:`.canary`, :mod:`.stores` (which registry and
MLflow store), :mod:`.executor_choice` (which executor, validated once, and
remembering it per sweep). They build the scheduler loop (:mod:`orchestrator.scheduler`,
:func:`.driver.build_scheduler`) and hand it the sweep's stopping and search
(:mod:`orchestrator.stopping`, :mod:`orchestrator.search`) through its hooks.
"""
