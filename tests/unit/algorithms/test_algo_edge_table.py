"""The advantage table and κ beyond the paper's G = 8, β = 0.001
(docs/algorithms.md#sharpness-kappa-and-the-advantage-table)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from orchestrator.algorithms.errors import AlgorithmError
from orchestrator.algorithms.sharpness import advantage_table, sharpness_kappa
from orchestrator.analysis.tables.render import render_advantage_table, round_half_up
from orchestrator.cli import algorithms_cmd


@pytest.mark.parametrize("g", [2, 3, 4, 16, 64])
@pytest.mark.parametrize("std", ["population", "unbiased"])
@pytest.mark.parametrize("beta", [0.001, 0.005, 1.0])
def test_closed_forms_for_any_group_size(g: int, std: str, beta: float) -> None:
    rows = advantage_table(g, beta, std=std)  # type: ignore[arg-type]
    assert [row.k for row in rows] == list(range(1, g))
    correction = g / (g - 1) if std == "unbiased" else 1.0
    for row in rows:
        k = row.k
        sigma = math.sqrt(k / g * (1 - k / g) * correction)
        assert row.reward_budget.pos == pytest.approx(1 / k - 1 / g)
        assert row.reward_budget.neg == pytest.approx(-1 / g)
        assert row.reward_budget.kappa == pytest.approx(1 / (beta * k))
        assert row.drgrpo.kappa == pytest.approx(1 / beta)
        assert row.grpo.pos == pytest.approx((1 - k / g) / sigma)
        assert row.grpo.kappa == pytest.approx(1 / (beta * sigma))


@pytest.mark.parametrize("beta", [0.0, -0.001, math.inf, math.nan])
def test_beta_must_be_positive_and_finite(beta: float) -> None:
    with pytest.raises(AlgorithmError, match="beta"):
        advantage_table(8, beta)
    with pytest.raises(ValueError, match="beta"):
        sharpness_kappa(1.0, 0.0, beta)


def test_round_half_up_any_magnitude() -> None:
    assert round_half_up(1e33, 0) == "1" + "0" * 33
    assert round_half_up(-2.5, 0) == "-3"
    assert round_half_up(math.inf, 0) == "inf"
    assert round_half_up(-math.inf, 2) == "-inf"


@pytest.mark.parametrize("fmt", ["markdown", "csv", "latex"])
def test_tiny_beta_renders_in_every_format(fmt: str) -> None:
    """κ = 1/β beyond 28 digits used to crash the rounding (decimal.InvalidOperation)."""
    for beta in (1e-30, 1e-320):
        text = render_advantage_table(advantage_table(2, beta), fmt)
        assert "1/2" in text or "1,2," in text


def _app() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(algorithms_cmd.commands)
    app.command("other")(lambda: None)
    return app


@pytest.mark.parametrize("args", [["-G", "2"], ["-G", "4", "--std", "unbiased"],
                                  ["-G", "16", "-f", "csv"], ["-G", "3", "-f", "latex"],
                                  ["--beta", "1e-30"], ["--beta", "0.005"]])
def test_cli_variants(args: list[str]) -> None:
    result = CliRunner().invoke(_app(), ["advantage-table", *args])
    assert result.exit_code == 0, result.output
    g = int(args[args.index("-G") + 1]) if "-G" in args else 8
    header = 1 if "csv" in args else (6 if "latex" in args else 2)
    footer = 2 if "latex" in args else 0
    assert len(result.output.splitlines()) == header + (g - 1) + footer


def test_cli_unbiased_std_g4_values() -> None:
    result = CliRunner().invoke(_app(), ["advantage-table", "-G", "4", "--std", "unbiased"])
    # k = 2 of 4: σ_unbiased = sqrt(4/3 · 1/4) = 0.577 -> A± = ±0.87, κ = 1732.
    assert "| 2/4 | 0.25 | -0.25 | 500 | 0.50 | -0.50 | 1000 | 0.87 | -0.87 | 1732 |" in (
        result.output)


def test_random_rewards_are_identical_across_processes() -> None:
    code = (
        "import torch\n"
        "from orchestrator.algorithms.rewards import random_rewards\n"
        "r = random_rewards(torch.arange(40)[:, None], torch.arange(16)[None, :], seed=11)\n"
        "print(''.join(str(int(x)) for x in r.reshape(-1).tolist()))\n"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True, env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
    bits = outputs.pop().strip()
    assert len(bits) == 640 and 0.4 < bits.count("1") / 640 < 0.6
