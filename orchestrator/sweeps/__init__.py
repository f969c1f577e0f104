"""Everything after submit, and the user's verbs on a sweep, one module each (nothing is
re-exported): the ``Sweep`` handle (:mod:`.sweep`) and its status (:mod:`.status`),
submit and resume (:mod:`.submission`, :mod:`.driver`, :mod:`.detached`), cancel, canary,
the stores and the executor choice.
"""
