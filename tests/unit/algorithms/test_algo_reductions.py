"""aggregate, masked_mean, broadcast_to_tokens, kl_penalty and entropy_from_logits."""

from __future__ import annotations

import math

import pytest
import torch

from orchestrator.algorithms.diagnostics import entropy_from_logits
from orchestrator.algorithms.errors import AlgorithmError
from orchestrator.algorithms.masking import aggregate, broadcast_to_tokens, masked_mean
from orchestrator.algorithms.policy_losses import kl_penalty

LOSS = torch.tensor([[1.0, 2.0, 3.0, 99.0], [4.0, 99.0, 99.0, 99.0], [99.0] * 4])
MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)


@pytest.mark.parametrize(
    ("mode", "factor", "expected"),
    [
        ("token-mean", None, 10 / 4),
        ("seq-mean-token-mean", None, (2 + 4) / 2),  # the empty response is left out
        ("seq-mean-token-sum-norm", None, (6 + 4) / 2 / 4),  # default factor: T
        ("seq-mean-token-sum-norm", 8, (6 + 4) / 2 / 8),
    ],
)
def test_aggregate_modes(mode: str, factor: int | None, expected: float) -> None:
    assert aggregate(LOSS, MASK, mode, factor).item() == pytest.approx(expected)


def test_aggregate_ignores_nan_in_padding_and_rejects_unknown_modes() -> None:
    loss = LOSS.clone()
    loss[0, 3] = math.nan
    assert aggregate(loss, MASK, "token-mean").item() == pytest.approx(2.5)
    with pytest.raises(AlgorithmError, match="seq-mean-token-mean"):
        aggregate(LOSS, MASK, "seq-mean")


def test_masked_mean_matches_verl_eps_and_axis() -> None:
    assert masked_mean(LOSS, MASK).item() == pytest.approx(10 / (4 + 1e-8))
    assert masked_mean(LOSS, MASK, dim=-1).tolist() == pytest.approx([2.0, 4.0, 0.0])


def test_broadcast_to_tokens_zeroes_padding() -> None:
    out = broadcast_to_tokens(torch.tensor([0.5, -1.0, 3.0]), MASK)
    assert out.tolist() == [[0.5, 0.5, 0.5, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0] * 4]
    with pytest.raises(ValueError):
        broadcast_to_tokens(torch.zeros(2), MASK)


def test_kl_estimators_by_hand() -> None:
    logp = torch.tensor([[0.0, -1.0]], dtype=torch.float64)
    ref = torch.tensor([[math.log(0.5), -1.0]], dtype=torch.float64)
    k1 = kl_penalty(logp, ref, "k1")
    assert k1[0].tolist() == pytest.approx([math.log(2), 0.0])
    k3 = kl_penalty(logp, ref, "low_var_kl")
    assert k3[0].tolist() == pytest.approx([0.5 - math.log(0.5) - 1, 0.0])
    assert torch.equal(k3, kl_penalty(logp, ref, "k3"))
    assert kl_penalty(logp, ref, "k2")[0, 0].item() == pytest.approx(0.5 * math.log(2) ** 2)
    assert kl_penalty(logp, ref, "abs")[0, 0].item() == pytest.approx(math.log(2))


def test_low_var_kl_is_clamped_like_verl() -> None:
    logp = torch.tensor([[-40.0, 0.0]])
    ref = torch.tensor([[0.0, -40.0]])
    out = kl_penalty(logp, ref, "low_var_kl")
    assert out[0, 0].item() == 10.0  # exp(20) − 21 clamped to 10
    assert out[0, 1].item() == 10.0  # e^-20 + 20 − 1 ≈ 19, clamped to 10


def test_low_var_kl_gradient() -> None:
    logp = torch.tensor([[-0.3]], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([[-0.1]], dtype=torch.float64)
    kl_penalty(logp, ref, "low_var_kl").sum().backward()
    # d/dlogp [e^(ref−logp) − (ref−logp) − 1] = −e^(ref−logp) + 1
    assert logp.grad is not None
    assert logp.grad.item() == pytest.approx(1 - math.exp(0.2))


def test_straight_through_variant_keeps_value_takes_k2_gradient() -> None:
    logp = torch.tensor([[-0.3]], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([[-0.1]], dtype=torch.float64)
    out = kl_penalty(logp, ref, "k3+")
    assert out.item() == pytest.approx(kl_penalty(logp, ref, "k3").item())
    out.sum().backward()
    assert logp.grad is not None
    assert logp.grad.item() == pytest.approx(-0.2)  # d/dlogp ½(logp − ref)²


def test_unknown_kl_kind_lists_known() -> None:
    with pytest.raises(AlgorithmError, match="low_var_kl"):
        kl_penalty(torch.zeros(1, 1), torch.zeros(1, 1), "k4")


def test_entropy_from_logits() -> None:
    logits = torch.zeros(2, 3, 4)
    logits[1, :, 0] = 1000.0  # near-deterministic and numerically extreme
    ent = entropy_from_logits(logits)
    assert ent.shape == (2, 3)
    assert ent[0].tolist() == pytest.approx([math.log(4)] * 3)
    assert ent[1].tolist() == pytest.approx([0.0] * 3, abs=1e-5)
    random_logits = torch.randn(3, 5, 7, generator=torch.Generator().manual_seed(0))
    reference = torch.distributions.Categorical(logits=random_logits).entropy()
    assert torch.allclose(entropy_from_logits(random_logits), reference, atol=1e-5)
