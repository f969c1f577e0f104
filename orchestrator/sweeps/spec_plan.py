"""A spec file's plan with command-line overrides applied (``kappa validate | plan |
submit | canary | search SPEC [OVERRIDE]...``): the spec read once, the overrides edit its
YAML document (:mod:`orchestrator.spec.overrides`), then every problem of the resulting
spec and its cells is reported at once, as for a file edited by hand; and what ``kappa
plan`` says of its cost."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from orchestrator.errors import UserInputError
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


def hours_figure(value: float) -> str:
    """1920 -> "1,920"; 0.25 -> "0.25"."""
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def cost_text(plan: Plan) -> str:
    """``8 cells × 1 GPU × 1 node × 2 h = 16 GPU-hours``."""
    def plural(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    res = plan.resources
    return (f"{plural(plan.count, 'cell')} × {plural(res.gpus, 'GPU')} × "
            f"{plural(res.nodes, 'node')} × {hours_figure(res.hours)} h = "
            f"{hours_figure(plan.gpu_hours)} GPU-hours")


def check_gpu_hours(plan: Plan, limit: float) -> None:
    """Refuse (``UserInputError``) a plan that needs more than ``limit`` GPU-hours."""
    if plan.gpu_hours > limit:
        over = plan.gpu_hours - limit
        raise UserInputError(
            f"plan needs {hours_figure(plan.gpu_hours)} GPU-hours, {hours_figure(over)} over the "
            f"limit of {hours_figure(limit)}",
            [plan.spec.problem(("resources",), cost_text(plan), found=hours_figure(plan.gpu_hours),
                               allowed=f"<= {hours_figure(limit)}",
                               fix="exclude cells, shorten resources.hours, or raise "
                                   "--max-gpu-hours")])


def seeds_text(plan: Plan) -> str:
    """What a ``seeds:`` block adds to the plan's cells, and its most GPU-hours."""
    seeds = plan.spec.seeds
    assert seeds is not None

    def listed(seeds: Sequence[int]) -> str:
        shown = [*map(str, seeds[:4]), "…", str(seeds[-1])] if len(seeds) > 5 else seeds
        return ", ".join(map(str, shown))

    values = seeds.seed_values()
    later = listed(values[seeds.start:]) or "none"
    return (f"seeds on demand: the cells above are seeds {listed(values[:seeds.start])}"
            f" of each comparison of {seeds.axis} against {json.dumps(seeds.base)}; seeds "
            f"{later} are added one at a time while one of a row's comparisons is undecided: "
            f"at most {plan.max_count:,} cells, "
            f"{hours_figure(plan.max_count * plan.resources.gpu_hours)} GPU-hours")
