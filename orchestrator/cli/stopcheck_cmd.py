"""``kappa stop-check SWEEP``: replay stopping rules on a finished full-length sweep, to
choose a rule on yesterday's sweep before spending on tomorrow's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli.sweep_options import RegistryOption
from orchestrator.errors import Problem, UserInputError

if TYPE_CHECKING:
    from orchestrator.registry import CellRecord
    from orchestrator.spec.stop_block import StopRules


def _rules(path: Path | None, stored: StopRules | None) -> StopRules:
    """The rules to replay: ``--rules`` (a ``stop:`` block, or a file holding one), else
    the sweep's own."""
    import yaml
    from pydantic import ValidationError

    from orchestrator.spec.stop_block import StopRules

    if path is None:
        if stored is None or not stored.group_metrics():
            raise UserInputError("no rules to replay", [Problem(
                "--rules", "the sweep has no plateau or threshold rule of its own",
                fix="give --rules rules.yaml holding e.g. stop: {plateau: {metric: ..., "
                    "min_steps: 40, patience: 15}, together: [reward_budget]}")])
        return stored
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UserInputError(f"cannot read --rules {path}", [Problem(
            "--rules", str(exc).splitlines()[0], found=str(path),
            fix="a YAML file with a stop: block")]) from None
    if isinstance(data, dict) and set(data) == {"stop"}:
        data = data["stop"]
    try:
        rules = StopRules.model_validate(data)
    except ValidationError as exc:
        raise UserInputError(f"invalid rules in {path}", [Problem(
            "stop." + ".".join(str(p) for p in err["loc"]), err["msg"],
            fix="see docs/spec.md#stopping-rules") for err in exc.errors()]) from None
    if not rules.group_metrics():
        raise UserInputError(f"no rules to replay in {path}", [Problem(
            "--rules", "a plateau or threshold rule is needed", found=str(data),
            fix="add plateau: {metric: ..., min_steps: N, patience: M}")])
    return rules


def stop_check(
    sweep: Annotated[str, typer.Argument(help="A finished sweep, run to full length.")],
    rules: Annotated[Path | None, typer.Option(
        "--rules", metavar="FILE",
        help="YAML holding the stop: block to replay (plateau, threshold, diverged, "
             "together). Default: the sweep's own stop: block.")] = None,
    together: Annotated[str | None, typer.Option(
        metavar="AXES", help="Replace the rules' together: (comma-separated axes; '' for "
                             "none: every cell stops on its own).")] = None,
    metric: Annotated[str | None, typer.Option(
        help="The metric compared (default: the plateau or threshold rule's).")] = None,
    delta: Annotated[str | None, typer.Option(
        metavar="AXIS=BASE", help="The compared axis and its base value (default: the "
                                  "together axis, against its first value).")] = None,
    seed_axis: Annotated[str, typer.Option(help="Axis of replicate seeds.")] = "seed",
    json_out: Annotated[Path | None, typer.Option(
        "--json", metavar="FILE", help="Also write the figures as JSON here.")] = None,
    registry: RegistryOption = None,
) -> None:
    """Replay stopping rules on a finished sweep: for each delta, its value at full length,
    where the rules would have stopped, and the steps and hours saved.

    Example: kappa stop-check toy-table2 --rules plateau.yaml --together reward_budget
    """
    from orchestrator import paths
    from orchestrator.analysis import stop_check as report

    paths.check_name(sweep)
    plan, cells = report.load(sweep, registry)
    chosen = _rules(rules, plan.stop)
    if together is not None:
        chosen = chosen.model_copy(update={"together": tuple(
            a.strip() for a in together.split(",") if a.strip())})
    known = [*plan.axes, *plan.labels]
    bad = [a for a in chosen.together if a not in known]
    if bad:
        raise UserInputError("together: names an axis the sweep does not have", [Problem(
            "--together", f"{bad[0]!r} is not an axis of {sweep}", found=", ".join(bad),
            allowed=", ".join(known), fix="name axes the sweep's results compare")])
    unfinished = [c for c in cells if not c.is_terminal]
    if unfinished:
        raise UserInputError(f"sweep {sweep} has not finished", [Problem(
            "sweep", f"{len(unfinished)} cell(s) still pending or running",
            fix="wait for it (kappa submit --wait / kappa status), then replay")])
    axis, base = _delta(delta, chosen, cells)
    result = report.check_sweep(plan, cells, chosen, metric, axis, base, seed_axis)
    early = sum(1 for c in cells if c.stop_reason)
    if early:
        typer.echo(f"note: {early} cell(s) of {sweep} were stopped early when it ran; the "
                   "replay judges only the steps they ran", err=True)
    typer.echo(report.render(result, _describe(chosen)), nl=False)
    if json_out is not None:
        json_out.write_text(json.dumps(result.as_json(), indent=1), encoding="utf-8")


def _delta(text: str | None, rules: StopRules, cells: list[CellRecord]) -> tuple[str, str]:
    if text is not None:
        axis, sep, base = text.partition("=")
        if not sep or not axis:
            raise UserInputError("invalid --delta", [Problem(
                "--delta", "expected AXIS=BASE", found=text, fix="e.g. reward_budget=false")])
        return axis, base
    if len(rules.together) != 1:
        raise UserInputError("which axis to compare?", [Problem(
            "--delta", "the rules compare no single axis", found=", ".join(rules.together),
            fix="give --delta AXIS=BASE, e.g. --delta reward_budget=false")])
    axis = rules.together[0]
    values = [c.axes[axis] for c in sorted(cells, key=lambda c: c.index) if axis in c.axes]
    first: Any = values[0] if values else ""
    return axis, str(first).lower() if isinstance(first, bool) else str(first)


def _describe(rules: StopRules) -> str:
    data = rules.model_dump(exclude_defaults=True, by_alias=True, exclude={"gpu_hours"})
    return json.dumps(data, default=str)


def register(app: typer.Typer) -> None:
    """Add ``kappa stop-check``."""
    app.command("stop-check")(stop_check)
