"""A canary sweep stores its grid's plan, stop block included, but runs under none of
its rules: a grid's GPU-hours cap (planned at the full run's hours) would otherwise keep
canaries from starting, and a rule could cut their two steps short."""

from __future__ import annotations

from orchestrator.backends import get_backend
from orchestrator.grid.plan import SweepPlan, parse_plan
from orchestrator.stopping.hook import SweepStopping

SPEC = """name: grid
backend: embedded
base: {task: addition}
resources: {gpus: 8, hours: 12}
stop:
  threshold: {metric: val-core/add-val/acc/mean@1, at_least: 0.9}
  gpu_hours: 100
"""


def _sweep(name: str) -> SweepPlan:
    # A canary sweep's plan is its grid's, renamed (orchestrator.sweeps.canary).
    return parse_plan(SPEC).sweep_plan().model_copy(update={"name": name})


def test_the_grid_has_its_rules_and_its_canaries_none() -> None:
    backend = get_backend("embedded")
    grid = SweepStopping.of(_sweep("grid"), backend)
    assert grid.rules is not None and grid.cap == 100
    canary = SweepStopping.of(_sweep("grid.canary"), backend)
    assert canary.rules is None and canary.cap is None
