"""The user's verbs on a sweep, one module each (this package re-exports nothing):
:mod:`.submission` (validate a spec, record the sweep), :mod:`.driver` (submit, resume),
:mod:`.detached` (a background scheduler), :mod:`.cancelling`, :mod:`.canary`,
:mod:`.stores` (which registry and MLflow store) and :mod:`.executor_choice` (which
executor, validated once, remembered per sweep).
"""
