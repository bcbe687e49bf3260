"""RA-BC weights, deltas and the weighted loss on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lc_robotics_reward.rabc import progress_deltas, rabc_filter, rabc_weights, weighted_bc_loss


def test_progress_deltas_look_one_chunk_ahead_and_clamp_at_the_end() -> None:
    p = np.array([0.0, 0.1, 0.3, 0.2, 0.6])
    np.testing.assert_allclose(progress_deltas(p, 2), [0.3, 0.1, 0.3, 0.4, 0.0])
    both = progress_deltas([p, np.array([0.5, 0.4])], 1)
    np.testing.assert_allclose(both, [0.1, 0.2, -0.1, 0.4, 0.0, -0.1, 0.0])


def test_weights_by_hand_with_given_statistics() -> None:
    # mu = 0.05, sigma = 0.1: soft = (r + 0.15) / 0.4
    r = np.array([0.5, 0.011, 0.01, 0.004, 0.0, -1e-9, -0.3])
    w = rabc_weights(r, kappa=0.01, mu=0.05, sigma=0.1, eps=0.0)
    np.testing.assert_allclose(w, [1.0, 1.0, 0.16 / 0.4, 0.154 / 0.4, 0.15 / 0.4, 0.0, 0.0])


def test_weights_use_dataset_statistics_by_default() -> None:
    r = np.array([0.02, 0.0, 0.0, 0.06])  # mu = 0.02, sigma = sqrt(0.0006)
    sigma = np.sqrt(np.mean((r - 0.02) ** 2))
    soft0 = (0.0 - (0.02 - 2 * sigma)) / (4 * sigma + 1e-6)
    np.testing.assert_allclose(rabc_weights(r), [1.0, soft0, soft0, 1.0])


def test_soft_weight_is_clipped_to_one_below_kappa() -> None:
    # a tiny sigma makes the soft weight exceed 1 before clipping
    w = rabc_weights(np.array([0.005, 1.0]), kappa=0.01, mu=0.0, sigma=0.001)
    assert w.tolist() == [1.0, 1.0]


def test_filter_keeps_only_clear_progress() -> None:
    assert rabc_filter(np.array([0.2, 0.01, 0.0, -0.1])).tolist() == [1.0, 0.0, 0.0, 0.0]


def test_weighted_loss_is_normalised_by_the_weight_sum() -> None:
    loss = torch.tensor([1.0, 2.0, 4.0], requires_grad=True)
    w = torch.tensor([1.0, 0.5, 0.0])
    out = weighted_bc_loss(loss, w)
    assert out.item() == pytest.approx((1.0 + 1.0) / 1.5)
    out.backward()
    np.testing.assert_allclose(loss.grad.numpy(), [1 / 1.5, 0.5 / 1.5, 0.0])
    assert weighted_bc_loss(loss, torch.ones(3)).item() == pytest.approx(7 / 3)


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match="chunk"):
        progress_deltas(np.zeros(3), 0)
    with pytest.raises(ValueError, match="finite"):
        rabc_weights(np.array([np.nan]))
    with pytest.raises(ValueError, match="same 1-D shape"):
        weighted_bc_loss(torch.zeros(3), torch.zeros(2))


def test_episode_filter_keeps_episodes_that_end_high() -> None:
    from lc_robotics_reward.rabc import episode_filter

    kept = episode_filter([np.array([0.1, 0.5, 0.95, 0.97]), np.array([0.2, 0.6, 0.4])], 0.9, 2)
    assert kept.tolist() == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="threshold"):
        episode_filter([np.zeros(2)], threshold=1.5)
