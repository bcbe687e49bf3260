"""SoLoPO losses against hand-computed values and the base methods."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lc_train.preference import (
    ResponseLogps,
    SoLoPOConfig,
    preference_loss,
    response_logps,
    solopo_loss,
)


def _r(logps, lengths, ref=None) -> ResponseLogps:
    t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    return ResponseLogps(t(logps), t(lengths), None if ref is None else t(ref))


def _sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_dpo_loss_by_hand() -> None:
    cfg = SoLoPOConfig(method="dpo", beta=0.5, alignment_weight=0.0)
    chosen, rejected = _r([-2.0], [4], [-3.0]), _r([-5.0], [4], [-4.0])
    # margin = 0.5 * ((-2 + 3) - (-5 + 4)) = 1.0
    assert float(preference_loss(cfg, chosen, rejected)) == pytest.approx(-math.log(_sig(1.0)))


def test_simpo_loss_by_hand() -> None:
    cfg = SoLoPOConfig(method="simpo", beta=2.0, simpo_gamma=0.5)
    chosen, rejected = _r([-4.0], [4]), _r([-9.0], [3])
    # rewards 2 * (-1) = -2 and 2 * (-3) = -6; margin 4 - gamma 0.5
    assert float(preference_loss(cfg, chosen, rejected)) == pytest.approx(-math.log(_sig(3.5)))


def test_orpo_loss_by_hand() -> None:
    cfg = SoLoPOConfig(method="orpo", orpo_lambda=0.1)
    chosen, rejected = _r([-2.0], [4]), _r([-6.0], [3])
    p_w, p_l = math.exp(-0.5), math.exp(-2.0)
    log_odds = math.log(p_w / (1 - p_w)) - math.log(p_l / (1 - p_l))
    expected = 0.5 - 0.1 * math.log(_sig(log_odds))
    assert float(preference_loss(cfg, chosen, rejected)) == pytest.approx(expected)


@pytest.mark.parametrize("method", ["dpo", "simpo", "orpo"])
def test_zero_alignment_weight_is_the_base_method(method: str) -> None:
    cfg = SoLoPOConfig(method=method, alignment_weight=0.0)
    sc, sr = _r([-2.0, -1.0], [4, 2], [-2.5, -1.5]), _r([-5.0, -3.0], [4, 5], [-4.0, -2.0])
    lc = _r([-7.0, -6.0], [4, 2], [-6.0, -4.0])
    loss, _ = solopo_loss(cfg, sc, sr, lc)
    assert float(loss) == pytest.approx(float(preference_loss(cfg, sc, sr).mean()))


def test_alignment_term_by_hand_chosen_only_and_both() -> None:
    cfg = SoLoPOConfig(method="simpo", beta=1.0, simpo_gamma=0.0, alignment_weight=2.0)
    sc, sr = _r([-2.0], [2]), _r([-4.0], [2])
    lc, lr = _r([-5.0], [2]), _r([-4.0], [2])
    base = -math.log(_sig(1.0))
    loss, metrics = solopo_loss(cfg, sc, sr, lc)
    assert float(loss) == pytest.approx(base + 2.0 * 1.5)  # |(-1) - (-2.5)|
    assert metrics["short_long_gap"] == pytest.approx(1.5)
    both = SoLoPOConfig(
        method="simpo", beta=1.0, simpo_gamma=0.0, alignment_weight=2.0, chosen_only=False
    )
    loss, _ = solopo_loss(both, sc, sr, lc, lr)
    assert float(loss) == pytest.approx(base + 2.0 * (1.5 + 0.0))
    sq = SoLoPOConfig(
        method="simpo", beta=1.0, simpo_gamma=0.0, alignment_weight=2.0, distance="squared"
    )
    assert float(solopo_loss(sq, sc, sr, lc)[0]) == pytest.approx(base + 2.0 * 1.5**2)


def test_gradients_reach_the_policy_only() -> None:
    policy = torch.tensor([-2.0, -5.0, -7.0], requires_grad=True)
    ref = torch.tensor([-3.0, -4.0, -6.0], requires_grad=True)
    one = torch.ones(1)
    mk = lambda i: ResponseLogps(policy[i : i + 1], one * 3, ref[i : i + 1])  # noqa: E731
    loss, _ = solopo_loss(SoLoPOConfig(method="dpo"), mk(0), mk(1), mk(2))
    loss.backward()
    assert policy.grad is not None
    assert bool((policy.grad != 0).all())
    assert ref.grad is None


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="empty response"):
        _r([-1.0], [0])
    with pytest.raises(ValueError, match="do not match"):
        ResponseLogps(torch.zeros(2), torch.ones(2), torch.zeros(3))
    with pytest.raises(ValueError, match="ref_logps"):
        preference_loss(SoLoPOConfig(method="dpo"), _r([-1.0], [1]), _r([-2.0], [1]))
    with pytest.raises(ValueError, match="long_rejected"):
        solopo_loss(
            SoLoPOConfig(method="simpo", chosen_only=False),
            _r([-1.0], [1]),
            _r([-2.0], [1]),
            _r([-1.0], [1]),
        )
    with pytest.raises(ValueError, match="method"):
        SoLoPOConfig(method="kto")  # type: ignore[arg-type]


def test_response_logps_sums_only_response_tokens() -> None:
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=50,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    )
    ids = torch.randint(0, 50, (2, 9))
    mask = torch.zeros(2, 9, dtype=torch.long)
    mask[:, 6:] = 1
    got = response_logps(model, ids, mask, reference=model)
    logp = torch.log_softmax(model(ids).logits.float(), -1)
    want = sum(logp[:, t - 1].gather(1, ids[:, t : t + 1]).squeeze(1) for t in range(6, 9))
    torch.testing.assert_close(got.logps, want, rtol=1e-5, atol=1e-5)
    assert got.lengths.tolist() == [3, 3]
    torch.testing.assert_close(got.ref_logps, want.detach(), rtol=1e-5, atol=1e-5)
