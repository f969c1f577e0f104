"""Advantage constructions: hand cases, edge cases and hypothesis properties
(docs/algorithms.md#advantages)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.algorithms.advantages import ADVANTAGES, advantages, reward_budget_shares
from orchestrator.algorithms.errors import AlgorithmError

BINARY_K2_G8 = torch.tensor([[1.0, 1, 0, 0, 0, 0, 0, 0]], dtype=torch.float64)


def test_registry_lists_the_three_constructions() -> None:
    assert set(ADVANTAGES) == {"grpo", "drgrpo", "reward_budget"}


def test_unknown_name_lists_known_names() -> None:
    with pytest.raises(AlgorithmError) as info:
        advantages("grop", BINARY_K2_G8)
    assert "drgrpo, grpo, reward_budget" in str(info.value)
    assert info.value.issues[0].fix == "did you mean 'grpo'?"


def test_unknown_option_is_a_user_error_naming_the_allowed_ones() -> None:
    with pytest.raises(AlgorithmError) as info:
        advantages("grpo", BINARY_K2_G8, sdt="population")
    assert "sdt" in str(info.value)
    assert info.value.issues[0].allowed == "std, eps"


def test_bad_std_kind_is_a_user_error() -> None:
    with pytest.raises(AlgorithmError):
        advantages("grpo", BINARY_K2_G8, std="biased")


def test_binary_closed_forms() -> None:
    k, g = 2, 8
    rb = advantages("reward_budget", BINARY_K2_G8)[0]
    dr = advantages("drgrpo", BINARY_K2_G8)[0]
    gp = advantages("grpo", BINARY_K2_G8, std="population", eps=0.0)[0]
    sigma = math.sqrt(k / g * (1 - k / g))
    assert rb[0].item() == pytest.approx(1 / k - 1 / g)
    assert rb[-1].item() == pytest.approx(-1 / g)
    assert dr[0].item() == pytest.approx(1 - k / g)
    assert dr[-1].item() == pytest.approx(-k / g)
    assert gp[0].item() == pytest.approx((1 - k / g) / sigma)
    assert gp[-1].item() == pytest.approx(-(k / g) / sigma)


def test_grpo_default_is_unbiased_std_with_eps_like_verl() -> None:
    r = torch.tensor([[1.0, 0.0, 0.0, 2.0]], dtype=torch.float64)
    expected = (r - r.mean()) / (r.std(correction=1) + 1e-6)
    assert torch.allclose(advantages("grpo", r), expected, atol=1e-12)
    population = advantages("grpo", r, std="population")
    assert not torch.allclose(population, expected)


def test_all_equal_group_gets_zero_everywhere() -> None:
    r = torch.full((2, 4), 3.0)
    for name in ADVANTAGES:
        assert torch.equal(advantages(name, r), torch.zeros(2, 4)), name


def test_single_response_groups_follow_verl_and_rb_skips() -> None:
    r = torch.tensor([[0.7], [0.0]], dtype=torch.float64)
    # verl uses mean 0 and std 1 for a group of one: the reward passes through.
    assert torch.allclose(advantages("grpo", r), r / (1 + 1e-6))
    assert torch.allclose(advantages("drgrpo", r), r)
    assert torch.equal(advantages("reward_budget", r), torch.zeros_like(r))
    for name in ADVANTAGES:
        assert torch.isfinite(advantages(name, r)).all()


def test_integer_rewards_are_accepted() -> None:
    out = advantages("drgrpo", torch.tensor([[1, 0]]))
    assert out.is_floating_point()
    assert out.tolist() == [[0.5, -0.5]]


def test_shape_is_checked() -> None:
    with pytest.raises(ValueError):
        advantages("grpo", torch.zeros(8))


# --- hypothesis properties -------------------------------------------------------------

rewards_rows = st.lists(
    st.floats(min_value=-10, max_value=10, allow_nan=False, allow_infinity=False),
    min_size=2, max_size=12,
)


def _tensor(row: list[float]) -> torch.Tensor:
    return torch.tensor([row], dtype=torch.float64)


@settings(max_examples=60, deadline=None)
@given(rewards_rows)
def test_rb_shares_sum_to_one_unless_skipped(row: list[float]) -> None:
    r = _tensor(row)
    shares = reward_budget_shares(r)
    adv = advantages("reward_budget", r)
    if max(row) == min(row):
        assert torch.equal(shares, torch.zeros_like(r))
        assert torch.equal(adv, torch.zeros_like(r))
    else:
        assert shares.sum().item() == pytest.approx(1.0, abs=1e-9)
        assert (shares >= 0).all()
        assert adv.sum().item() == pytest.approx(0.0, abs=1e-9)
        assert adv.min().item() == pytest.approx(-1 / len(row))


@settings(max_examples=60, deadline=None)
@given(rewards_rows, st.floats(min_value=0.01, max_value=100),
       st.floats(min_value=-50, max_value=50))
def test_rb_invariant_to_positive_scale_and_shift(row: list[float], scale: float,
                                                 shift: float) -> None:
    r = _tensor(row)
    base = advantages("reward_budget", r)
    moved = advantages("reward_budget", r * scale + shift)
    if max(row) - min(row) < 1e-6:
        return  # float noise after the shift may un-skip a numerically degenerate group
    assert torch.allclose(base, moved, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(rewards_rows, st.floats(min_value=0.1, max_value=10),
       st.floats(min_value=-50, max_value=50))
def test_grpo_invariant_to_positive_affine_maps(row: list[float], scale: float,
                                               shift: float) -> None:
    r = _tensor(row)
    if r.std().item() < 0.1:
        return  # eps = 1e-6 breaks exact invariance only for near-constant groups
    for std in ("unbiased", "population"):
        base = advantages("grpo", r, std=std)
        moved = advantages("grpo", r * scale + shift, std=std)
        assert torch.allclose(base, moved, rtol=1e-4, atol=1e-4)


@settings(max_examples=60, deadline=None)
@given(rewards_rows, st.floats(min_value=-20, max_value=20),
       st.floats(min_value=-50, max_value=50))
def test_drgrpo_is_linear_in_scale_and_ignores_shift(row: list[float], scale: float,
                                                    shift: float) -> None:
    r = _tensor(row)
    base = advantages("drgrpo", r)
    assert torch.allclose(advantages("drgrpo", r * scale + shift), scale * base, atol=1e-9)
