"""DAPO pieces against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from lc_train.rl import (
    DAPOConfig,
    broadcast_to_turns,
    clipped_token_objective,
    group_advantages,
    informative_groups,
    overlong_penalty,
    sample_level_mean,
    token_level_mean,
)


def test_group_advantages_by_hand() -> None:
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    adv = group_advantages(rewards, std_eps=0.0 + 1e-12)
    # group 1: mean 0.5, population std 0.5 -> +-1
    torch.testing.assert_close(adv[0], torch.tensor([1.0, -1.0, -1.0, 1.0]))
    torch.testing.assert_close(adv[1], torch.zeros(4))


def test_group_of_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="group_size must be >= 2"):
        group_advantages(torch.tensor([[1.0], [0.0]]))


def test_dynamic_sampling_drops_groups_with_equal_rewards() -> None:
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    assert informative_groups(rewards).tolist() == [False, True, False]


def test_overlong_penalty_by_hand() -> None:
    lengths = torch.tensor([10, 16, 17, 18, 20, 21])
    got = overlong_penalty(lengths, max_length=20, cache=4)
    # ramp starts after 16 tokens: (16 - L) / 4
    torch.testing.assert_close(got, torch.tensor([0.0, 0.0, -0.25, -0.5, -1.0, -1.0]))
    torch.testing.assert_close(overlong_penalty(lengths, 20, 0), torch.tensor([0.0] * 5 + [-1.0]))


def test_clip_higher_by_hand() -> None:
    old = torch.zeros(1, 4)
    new = torch.log(torch.tensor([[1.5, 1.5, 0.5, 0.5]]))  # ratios
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    got = clipped_token_objective(new, old, adv, eps_low=0.2, eps_high=0.28)
    # A>0, rho=1.5 -> clipped at 1.28; A<0, rho=1.5 -> min(-1.5, -1.28) = -1.5;
    # A>0, rho=0.5 -> min(0.5, 0.8) = 0.5; A<0, rho=0.5 -> min(-0.5, -0.8) = -0.8
    torch.testing.assert_close(got, -torch.tensor([[1.28, -1.5, 0.5, -0.8]]))


def test_clip_higher_gradient_is_zero_where_clipped() -> None:
    new = torch.log(torch.tensor([[1.5, 1.1]])).requires_grad_()
    loss = clipped_token_objective(new, torch.zeros(1, 2), torch.ones(1, 2)).sum()
    loss.backward()
    assert new.grad[0, 0] == 0  # above 1 + eps_high with A > 0: clipped, no gradient
    assert math.isclose(float(new.grad[0, 1]), -1.1, rel_tol=1e-6)


def test_token_level_versus_sample_level_mean() -> None:
    losses = torch.tensor([[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.float32)
    assert float(token_level_mean(losses, mask)) == pytest.approx(8 / 5)
    assert float(sample_level_mean(losses, mask)) == pytest.approx((1 + 4) / 2)
    with pytest.raises(ValueError, match="no tokens"):
        token_level_mean(losses, torch.zeros_like(mask))


def test_multi_conversation_advantage_broadcast() -> None:
    rewards = torch.tensor([[1.0, 0.0]])  # one group, two samples; final answers rewarded
    adv = group_advantages(rewards).reshape(-1)
    per_turn = broadcast_to_turns(adv, [3, 2])  # sample 0: 2 memory updates + answer
    torch.testing.assert_close(
        per_turn, torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0]), atol=1e-5, rtol=0
    )
    with pytest.raises(ValueError, match="at least one turn"):
        broadcast_to_turns(adv, [3, 0])


def test_config_validates() -> None:
    assert DAPOConfig().eps_high > DAPOConfig().eps_low
    with pytest.raises(ValueError, match="overlong_cache"):
        DAPOConfig(max_length=100, overlong_cache=100)
