"""Chat notifications about sweeps (docs/spec.md#notifications): what to post is recorded
per sweep at submit (:mod:`.store`), and the scheduler posts :mod:`.messages` through a
hook (:mod:`.hook`) whose sender never makes the loop wait."""
