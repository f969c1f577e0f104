"""Chat notifications about sweeps (issue 18): a JSON POST in Slack's incoming-webhook
shape when a sweep ends, a cell fails for good, a canary fails or a ``diverged`` rule
fires (docs/spec.md#notifications).

What to notify is the spec's ``notify:`` block (:mod:`orchestrator.spec.notify_block`)
or ``kappa submit --notify URL``, recorded per sweep at submit (:mod:`.store`); the
scheduler posts through a hook (:mod:`.hook`) whose sender (:mod:`.sender`) never makes
the loop wait; the messages are :mod:`.messages`.
"""
