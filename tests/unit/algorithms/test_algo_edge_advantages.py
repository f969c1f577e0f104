"""Advantage constructions on inputs beyond binary rewards and float32
(docs/algorithms.md#advantages).

Partial credit, negative and κ-scaled rewards, equal groups whose mean is not exactly
representable, group sizes 1..64, many groups at once, 16-bit and float64 inputs, and
non-finite rewards (which must raise, not turn a group's advantages into NaN).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.algorithms.advantages import ADVANTAGES, advantages, reward_budget_shares

NAMES = sorted(ADVANTAGES)


def test_partial_credit_by_hand() -> None:
    r = torch.tensor([[0.3, 0.7, 0.0, 1.0]], dtype=torch.float64)
    # RB: gaps 0.3, 0.7, 0, 1 (sum 2) -> shares .15, .35, 0, .5 -> minus 1/4.
    assert advantages("reward_budget", r)[0].tolist() == pytest.approx([-0.1, 0.1, -0.25, 0.25])
    assert advantages("drgrpo", r)[0].tolist() == pytest.approx([-0.2, 0.2, -0.5, 0.5])
    std = math.sqrt(sum((x - 0.5) ** 2 for x in (0.3, 0.7, 0.0, 1.0)) / 3)
    assert advantages("grpo", r)[0].tolist() == pytest.approx(
        [(x - 0.5) / (std + 1e-6) for x in (0.3, 0.7, 0.0, 1.0)])


def test_negative_rewards_by_hand() -> None:
    r = torch.tensor([[-2.0, -3.0, -4.0, -2.0]], dtype=torch.float64)
    # RB: min −4, gaps 2, 1, 0, 2 (sum 5) -> shares .4, .2, 0, .4 -> minus 1/4.
    assert advantages("reward_budget", r)[0].tolist() == pytest.approx([0.15, -0.05, -0.25, 0.15])
    assert advantages("drgrpo", r)[0].tolist() == pytest.approx([0.75, -0.25, -1.25, 0.75])


@pytest.mark.parametrize(("r_pos", "r_neg"), [(5.0, 0.0), (1.0, -1.0), (2.0, 0.0)])
def test_kappa_scaled_binary_rewards(r_pos: float, r_neg: float) -> None:
    correct = torch.tensor([[1, 1, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    binary = correct.to(torch.float64)
    scaled = torch.where(correct, r_pos, r_neg).to(torch.float64)
    gap = r_pos - r_neg
    # RB is invariant to the scale, DrGRPO linear in the gap, GRPO invariant (up to eps).
    assert torch.allclose(advantages("reward_budget", scaled), advantages("reward_budget", binary))
    assert torch.allclose(advantages("drgrpo", scaled), gap * advantages("drgrpo", binary))
    assert torch.allclose(advantages("grpo", scaled, eps=0.0), advantages("grpo", binary, eps=0.0))


@settings(max_examples=80, deadline=None)
@given(st.floats(min_value=-100, max_value=100, allow_nan=False, width=32),
       st.integers(min_value=2, max_value=64),
       st.sampled_from([torch.float16, torch.bfloat16, torch.float32, torch.float64]),
       st.sampled_from(NAMES), st.sampled_from(["unbiased", "population"]))
def test_equal_group_gets_exactly_zero(value: float, g: int, dtype: torch.dtype, name: str,
                                       std: str) -> None:
    """0.1 × 16 in float32 used to give GRPO advantages of −0.0074 (rounding / eps)."""
    r = torch.full((3, g), value, dtype=dtype)
    r[1] = torch.linspace(0, 1, g, dtype=dtype)  # one informative group beside them
    opts = {"std": std} if name == "grpo" else {}
    adv = advantages(name, r, **opts)
    assert adv.dtype == dtype
    assert torch.equal(adv[0], torch.zeros(g, dtype=dtype))
    assert torch.equal(adv[2], torch.zeros(g, dtype=dtype))
    assert bool((adv[1] != 0).any())


def test_equal_group_regression_case() -> None:
    r = torch.full((1, 16), 0.1)
    assert torch.equal(advantages("grpo", r), torch.zeros(1, 16))
    assert torch.equal(advantages("drgrpo", torch.full((1, 3), 0.1, dtype=torch.float64)),
                       torch.zeros(1, 3, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", NAMES)
def test_16_bit_inputs_are_computed_wide_and_rounded_once(dtype: torch.dtype, name: str) -> None:
    gen = torch.Generator().manual_seed(3)
    r = (torch.rand(32, 16, generator=gen) * 10 - 3).to(dtype)
    wide = advantages(name, r.to(torch.float64))
    out = advantages(name, r)
    assert out.dtype == dtype
    # Correctly rounded: what float64 arithmetic gives on the same (rounded) inputs.
    assert torch.equal(out, wide.to(dtype))


def test_float16_large_rewards_do_not_overflow_the_std() -> None:
    r = torch.tensor([[300.0, -300.0, 0.0, 0.0]], dtype=torch.float16)  # 300² > fp16 max
    out = advantages("grpo", r, std="population")
    assert torch.isfinite(out).all()
    assert out[0, 0].item() == pytest.approx(300 / math.sqrt(45000), rel=1e-3)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_rewards_raise_a_clear_error(name: str, bad: float) -> None:
    r = torch.tensor([[1.0, 0.0, 1.0], [0.0, bad, 1.0]])
    with pytest.raises(ValueError, match=r"finite.*\(1, 1\)"):
        advantages(name, r)


@pytest.mark.parametrize("name", NAMES)
def test_empty_groups_are_rejected_and_empty_batches_pass(name: str) -> None:
    with pytest.raises(ValueError, match="G = 0"):
        advantages(name, torch.zeros(2, 0))
    assert advantages(name, torch.zeros(0, 4)).shape == (0, 4)


@pytest.mark.parametrize("g", [1, 2, 3, 16, 64])
def test_group_sizes(g: int) -> None:
    gen = torch.Generator().manual_seed(g)
    r = torch.randint(0, 2, (40, g), generator=gen).to(torch.float64)
    rb = advantages("reward_budget", r)
    dr = advantages("drgrpo", r)
    gp = advantages("grpo", r, std="population", eps=0.0)
    for row in range(40):
        k = int(r[row].sum())
        if g == 1:
            assert rb[row].tolist() == [0.0]  # skipped: one response has no gap
            assert dr[row].tolist() == r[row].tolist()  # verl: mean 0 for a group of one
            continue
        if k in (0, g):
            assert rb[row].abs().sum() == dr[row].abs().sum() == gp[row].abs().sum() == 0
            continue
        sigma = math.sqrt(k / g * (1 - k / g))
        for i in range(g):
            good = r[row, i].item() == 1.0
            assert rb[row, i].item() == pytest.approx(1 / k - 1 / g if good else -1 / g)
            assert dr[row, i].item() == pytest.approx(1 - k / g if good else -k / g)
            assert gp[row, i].item() == pytest.approx(
                (1 - k / g) / sigma if good else -(k / g) / sigma)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.floats(min_value=-5, max_value=5, allow_nan=False), min_size=4,
                         max_size=4), min_size=1, max_size=12),
       st.sampled_from(NAMES))
def test_many_groups_at_once_equal_one_group_at_a_time(rows: list[list[float]],
                                                        name: str) -> None:
    r = torch.tensor(rows, dtype=torch.float64)
    together = advantages(name, r)
    for i in range(len(rows)):
        # torch's batched std may differ from a single row's in the last bit.
        torch.testing.assert_close(together[i:i + 1], advantages(name, r[i:i + 1]),
                                   rtol=0, atol=1e-12)


def test_shares_keep_the_input_dtype() -> None:
    r = torch.tensor([[0.0, 1.0, 3.0]], dtype=torch.bfloat16)
    shares = reward_budget_shares(r)
    assert shares.dtype == torch.bfloat16
    assert shares.float().tolist()[0] == pytest.approx([0.0, 0.25, 0.75])


def test_negative_eps_is_rejected() -> None:
    with pytest.raises(ValueError, match="eps"):
        advantages("grpo", torch.tensor([[1.0, 0.0]]), eps=-1.0)
