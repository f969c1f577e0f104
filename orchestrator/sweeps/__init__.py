"""Everything after submit, and the user's verbs on a sweep, one module each (this package
re-exports nothing): :mod:`.sweep` (the ``Sweep`` handle: the stored plan, the sweep's and
its cells' folders, recording cells, its status), :mod:`.status` (``SweepStatus``, what
every view renders), :mod:`.submission` (validate a spec, record the sweep),
:mod:`.driver` (submit, resume), :mod:`.detached` (a background scheduler),
:mod:`.cancelling`, :mod:`.canary`, :mod:`.stores` (which registry and MLflow store) and
:mod:`.executor_choice` (which executor, validated once, remembered per sweep).
"""
