"""A spec file's plan with command-line overrides applied (``kappa validate | plan |
submit | canary | search SPEC [OVERRIDE]...``): the spec read once, the overrides edit its
YAML document (:mod:`orchestrator.spec.overrides`), then every problem of the resulting
spec and its cells is reported at once, as for a file edited by hand."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from orchestrator.grid.plan import Plan, checked, load_plan, plan
from orchestrator.spec.loader import read_spec
from orchestrator.spec.yaml_limits import read_yaml_file


def load_plan_with(path: str | Path, overrides: Sequence[str] = (), judge: bool = False,
                   models: bool = False) -> Plan:
    """The plan of the spec file at ``path`` with ``overrides`` applied (see
    :func:`orchestrator.grid.plan.load_plan`, which this is without overrides)."""
    if not overrides:
        return load_plan(path, judge=judge, models=models)
    file = Path(path)
    reading = read_spec(read_yaml_file(file, "spec"), str(file), file, overrides)
    return plan(checked(reading), judge=judge, models=models)
