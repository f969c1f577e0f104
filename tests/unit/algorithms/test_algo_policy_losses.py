"""Policy losses against hand-computed cases: values, gradients, metrics
(docs/algorithms.md#policy-losses)."""

from __future__ import annotations

import math

import pytest
import torch

from orchestrator.algorithms.errors import AlgorithmError
from orchestrator.algorithms.policy_losses import POLICY_LOSSES, loss_options, policy_loss

INF = math.inf

# One response of six tokens, each exercising one branch of the PPO clip (ε_low 0.2,
# ε_high 0.28, c 3):        in range, upper clip, lower clip, dual clip, A<0 below c, A>0 low.
RATIOS = [1.1, 1.5, 0.5, 4.0, 2.0, 0.5]
ADVS = [1.0, 1.0, -1.0, -1.0, -1.0, 1.0]
VANILLA_LOSSES = [-1.1, -1.28, 0.8, 3.0, 2.0, -0.5]
VANILLA_GRADS = [-1.1, 0.0, 0.0, 0.0, 2.0, -0.5]  # d loss_t / d log π_θ(o_t)


def _case(ratios: list[float], advs: list[float]) -> tuple[torch.Tensor, torch.Tensor,
                                                            torch.Tensor, torch.Tensor]:
    old = torch.full((1, len(ratios)), -1.3, dtype=torch.float64)
    new = (old + torch.log(torch.tensor([ratios], dtype=torch.float64))).requires_grad_(True)
    adv = torch.tensor([advs], dtype=torch.float64)
    mask = torch.ones(1, len(ratios), dtype=torch.bool)
    return old, new, adv, mask


def _vanilla(new: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
             low: float = 0.2, high: float = 0.28, c: float = 3.0,
             mode: str = "token-mean") -> tuple[torch.Tensor, dict[str, float]]:
    return policy_loss("vanilla", old, new, adv, mask, agg_mode=mode, clip_ratio_low=low,
                       clip_ratio_high=high, clip_ratio_c=c)


def test_vanilla_value_gradient_and_metrics() -> None:
    old, new, adv, mask = _case(RATIOS, ADVS)
    loss, metrics = _vanilla(new, old, adv, mask)
    loss.backward()
    assert loss.item() == pytest.approx(sum(VANILLA_LOSSES) / 6)
    assert new.grad is not None
    assert new.grad[0].tolist() == pytest.approx([g / 6 for g in VANILLA_GRADS])
    assert metrics["actor/pg_loss"] == pytest.approx(loss.item())
    assert metrics["actor/pg_clipfrac"] == pytest.approx(2 / 6)  # tokens 2 and 3
    assert metrics["actor/pg_clipfrac_lower"] == pytest.approx(1 / 6)  # token 4 (dual clip)
    expected_kl = -sum(math.log(r) for r in RATIOS) / 6
    assert metrics["actor/ppo_kl"] == pytest.approx(expected_kl)


def test_vanilla_infinite_epsilon_is_the_plain_surrogate() -> None:
    old, new, adv, mask = _case(RATIOS, ADVS)
    loss, metrics = _vanilla(new, old, adv, mask, low=INF, high=INF)
    loss.backward()
    plain = [-a * r for a, r in zip(ADVS, RATIOS, strict=True)]
    assert loss.item() == pytest.approx(sum(plain) / 6)
    assert new.grad is not None
    assert new.grad[0].tolist() == pytest.approx([p / 6 for p in plain])
    assert metrics["actor/pg_clipfrac"] == 0.0
    assert metrics["actor/pg_clipfrac_lower"] == 0.0


def test_vanilla_infinite_c_only_disables_the_dual_clip() -> None:
    old, new, adv, mask = _case(RATIOS, ADVS)
    loss, metrics = _vanilla(new, old, adv, mask, c=INF)
    expected = VANILLA_LOSSES.copy()
    expected[3] = 4.0  # the dual clip no longer caps token 4
    assert loss.item() == pytest.approx(sum(expected) / 6)
    assert metrics["actor/pg_clipfrac_lower"] == 0.0


def test_vanilla_symmetric_clip_changes_the_upper_side() -> None:
    old, new, adv, mask = _case([1.25], [1.0])
    assert _vanilla(new, old, adv, mask, low=0.2, high=0.2)[0].item() == pytest.approx(-1.2)
    assert _vanilla(new, old, adv, mask, low=0.2, high=0.28)[0].item() == pytest.approx(-1.25)


def test_vanilla_padding_is_ignored_even_if_wild() -> None:
    old, new, adv, mask = _case([*RATIOS, 50.0], [*ADVS, -1.0])
    mask[0, -1] = False
    loss, metrics = _vanilla(new, old, adv, mask)
    loss.backward()
    assert loss.item() == pytest.approx(sum(VANILLA_LOSSES) / 6)
    assert new.grad is not None
    assert new.grad[0, -1].item() == 0.0
    assert metrics["actor/pg_clipfrac"] == pytest.approx(2 / 6)


def test_advantages_per_response_broadcast() -> None:
    old, new, _, mask = _case([1.1, 0.9], [1.0, 1.0])
    by_token = _vanilla(new, old, torch.ones(1, 2, dtype=torch.float64), mask)[0]
    by_response = _vanilla(new, old, torch.ones(1, dtype=torch.float64), mask)[0]
    assert by_token.item() == pytest.approx(by_response.item())


def test_vanilla_three_aggregation_modes() -> None:
    # Two responses: lengths 3 and 1 (padded to T = 4), ratio 1 so loss_t = -A_t.
    old = torch.zeros(2, 4, dtype=torch.float64)
    new = old.clone().requires_grad_(True)
    adv = torch.tensor([[-1.0, -2.0, -3.0, 9.0], [-4.0, 9.0, 9.0, 9.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
    # loss matrix [[1, 2, 3], [4]]
    cases = {
        ("token-mean", None): 10 / 4,
        ("seq-mean-token-mean", None): (2 + 4) / 2,
        ("seq-mean-token-sum-norm", None): (6 + 4) / 2 / 4,
        ("seq-mean-token-sum-norm", 10.0): (6 + 4) / 2 / 10,
    }
    for (mode, factor), expected in cases.items():
        loss, _ = policy_loss("vanilla", old, new, adv, mask, agg_mode=mode, clip_ratio_low=0.2,
                              clip_ratio_high=0.2, loss_scale_factor=factor)
        assert loss.item() == pytest.approx(expected), mode
    # Gradient of seq-mean-token-mean: each token of response i weighs 1/(2 * len_i).
    loss, _ = policy_loss("vanilla", old, new, adv, mask, agg_mode="seq-mean-token-mean",
                          clip_ratio_low=0.2, clip_ratio_high=0.2)
    loss.backward()
    assert new.grad is not None
    expected_grad = [[1 / 6, 2 / 6, 3 / 6, 0.0], [4 / 2, 0.0, 0.0, 0.0]]
    assert torch.allclose(new.grad, torch.tensor(expected_grad, dtype=torch.float64))


def test_gspo_uses_one_sequence_ratio_per_response() -> None:
    old = torch.zeros(2, 2, dtype=torch.float64)
    new = torch.tensor([[0.1, 0.3], [0.5, 0.5]], dtype=torch.float64).requires_grad_(True)
    adv = torch.ones(2, 2, dtype=torch.float64)
    mask = torch.ones(2, 2, dtype=torch.bool)
    loss, metrics = policy_loss("gspo", old, new, adv, mask, agg_mode="seq-mean-token-mean",
                                clip_ratio_low=0.2, clip_ratio_high=0.28)
    loss.backward()
    s1 = math.exp(0.2)  # exp(mean(0.1, 0.3)), inside [0.8, 1.28]
    # Response 2: s = e^0.5 > 1.28 is clipped, so its tokens get no gradient.
    assert loss.item() == pytest.approx((-s1 + -1.28) / 2)
    assert new.grad is not None
    # Each token of response 1 carries sg[s]·∇log π: weight s / (2 responses · 2 tokens).
    expected_grad = torch.tensor([[-s1 / 4, -s1 / 4], [0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(new.grad, expected_grad)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(0.5)
    assert metrics["actor/pg_clipfrac_lower"] == 0.0
    assert metrics["actor/ppo_kl"] == pytest.approx(-(0.1 + 0.3 + 0.5 + 0.5) / 4)


def test_gspo_sequence_ratio_ignores_padding() -> None:
    old = torch.zeros(1, 3, dtype=torch.float64)
    new = torch.tensor([[0.1, 0.3, 7.0]], dtype=torch.float64).requires_grad_(True)
    mask = torch.tensor([[1, 1, 0]], dtype=torch.bool)
    loss, _ = policy_loss("gspo", old, new, torch.ones(1, 3, dtype=torch.float64), mask,
                          agg_mode="seq-mean-token-mean", clip_ratio_low=0.2,
                          clip_ratio_high=0.28)
    assert loss.item() == pytest.approx(-math.exp(0.2))


def test_registry_and_loss_options() -> None:
    assert set(POLICY_LOSSES) == {"vanilla", "gspo", "clip_cov", "kl_cov"}
    assert loss_options("vanilla") == ()
    assert loss_options("clip_cov") == ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub",
                                        "generator")
    assert loss_options("kl_cov") == ("kl_cov_ratio", "ppo_kl_coef")


def test_unknown_loss_and_bad_settings_are_user_errors() -> None:
    old, new, adv, mask = _case([1.0], [1.0])
    with pytest.raises(AlgorithmError, match="clip_cov, gspo, kl_cov, vanilla"):
        policy_loss("vanila", old, new, adv, mask, agg_mode="token-mean", clip_ratio_low=0.2,
                    clip_ratio_high=0.2)
    with pytest.raises(AlgorithmError) as info:
        policy_loss("vanilla", old, new, adv, mask, agg_mode="token-mean", clip_ratio_low=-1,
                    clip_ratio_high=0.2, clip_ratio_c=0.5, kl_cov_ratio=0.1)
    assert len(info.value.issues) == 3  # every problem at once
    with pytest.raises(AlgorithmError, match="token-mean"):
        policy_loss("vanilla", old, new, adv, mask, agg_mode="token-sum", clip_ratio_low=0.2,
                    clip_ratio_high=0.2)
