"""``kappa advantage-table``: the advantages and sharpness κ of each construction per k/G."""

from __future__ import annotations

from enum import StrEnum

import typer

from orchestrator.errors import Problem, UserInputError


class StdChoice(StrEnum):
    """How GRPO's group standard deviation is computed."""

    population = "population"
    unbiased = "unbiased"


class TableFormat(StrEnum):
    """Output format of the table."""

    markdown = "markdown"
    csv = "csv"
    latex = "latex"


_HELP = (
    "Print binary-reward advantages A⁺/A⁻ and the sharpness κ = (A⁺ − A⁻)/β of Reward Budget, "
    "DrGRPO and GRPO for k = 1 .. G−1 correct answers out of G.\n\n"
    "Reward budgeting gives 1/k − 1/G to a correct answer and −1/G to a wrong one "
    "(κ = 1/(βk)); DrGRPO gives 1 − k/G and −k/G (κ = 1/β); GRPO divides DrGRPO's by the "
    "group std σ (κ = 1/(βσ)).\n\n"
    "The defaults (G = 8, β = 0.001, population std) reproduce Table 1 of 'Reward Budgeting "
    "Reduces Premature Convergence': RB κ = 1000, 500, 333, 250, 200, 167, 143; DrGRPO 1000; "
    "GRPO 3024, 2309, 2066, 2000, 2066, 2309, 3024.\n\n"
    "Example: kappa advantage-table --group-size 16 --beta 0.005 --format latex"
)
commands = typer.Typer()  # added to ``kappa`` by orchestrator.cli.app


@commands.command("advantage-table", help=_HELP)
def advantage_table_command(
    group_size: int = typer.Option(
        8, "--group-size", "-G", min=2, help="Responses per prompt (G); rows are k = 1 .. G-1."),
    beta: float = typer.Option(
        0.001, "--beta", "-b", help="KL strength β (> 0) in κ = (A⁺ − A⁻)/β."),
    std: StdChoice = typer.Option(
        StdChoice.population, "--std", case_sensitive=False,
        help="GRPO's std: population (N, the paper's Table 1) or unbiased (N−1, verl's default)."),
    fmt: TableFormat = typer.Option(
        TableFormat.markdown, "--format", "-f", case_sensitive=False,
        help="markdown and latex round like the paper (2 decimals, κ to integers); "
        "csv keeps full precision."),
) -> None:
    """Print binary-reward advantages A⁺/A⁻ and sharpness κ per k/G (see ``_HELP``)."""
    from orchestrator.algorithms.errors import AlgorithmError
    from orchestrator.algorithms.sharpness import advantage_table
    from orchestrator.analysis.tables.render import render_advantage_table

    try:
        rows = advantage_table(group_size, beta, std=std.value)
    except AlgorithmError as exc:  # the algorithms' error, as kappa's exit-2 user error
        raise UserInputError(exc.summary, [Problem(**vars(i)) for i in exc.issues]) from exc
    typer.echo(render_advantage_table(rows, fmt.value), nl=False)
