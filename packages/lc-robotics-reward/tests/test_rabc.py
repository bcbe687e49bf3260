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
        rabc_weights(np.array([np.inf]))
    with pytest.raises(ValueError, match="infinite"):
        progress_deltas(np.array([0.0, -np.inf]), 1)
    with pytest.raises(ValueError, match="same 1-D shape"):
        weighted_bc_loss(torch.zeros(3), torch.zeros(2))


def test_episode_filter_keeps_episodes_that_end_high() -> None:
    from lc_robotics_reward.rabc import episode_filter

    kept = episode_filter([np.array([0.1, 0.5, 0.95, 0.97]), np.array([0.2, 0.6, 0.4])], 0.9, 2)
    assert kept.tolist() == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="threshold"):
        episode_filter([np.zeros(2)], threshold=1.5)


def _lerobot_rabc_reference(
    progress: dict[int, list[float]], chunk: int, kappa: float = 0.01, eps: float = 1e-6
) -> list[float]:
    """RA-BC weights as LeRobot's SARM sample weighter defines them, written out frame by
    frame: the delta looks ``chunk`` frames ahead inside the episode (its last frame at
    the end); frames with unknown (NaN) progress are left out of the statistics and get
    the fallback weight 1; ``mu = max(mean, 0)``, ``sigma = max(std, eps)``."""
    deltas: list[float] = []
    for values in progress.values():
        n = len(values)
        for t in range(n):
            future = values[min(t + chunk, n - 1)]
            deltas.append(future - values[t])
    known = [d for d in deltas if d == d]
    mean = sum(known) / len(known)
    std = (sum((d - mean) ** 2 for d in known) / len(known)) ** 0.5
    mu, sigma = max(mean, 0.0), max(std, eps)
    out = []
    for d in deltas:
        if d != d or d > kappa:  # unknown (fallback) or clear progress
            out.append(1.0)
        elif d >= 0:
            out.append(min(max((d - (mu - 2 * sigma)) / (4 * sigma + eps), 0.0), 1.0))
        else:
            out.append(0.0)
    return out


@pytest.mark.parametrize("chunk", [1, 3, 50])
def test_weights_match_lerobots_definition_on_the_same_progress(chunk: int) -> None:
    rng = np.random.default_rng(chunk)
    progress = {
        0: np.cumsum(rng.uniform(0.0, 0.02, 40)).tolist(),  # steady progress
        1: (0.8 - np.cumsum(rng.uniform(0.0, 0.03, 30))).tolist(),  # regresses throughout
        2: [0.5] * 12 + [0.45, np.nan, 0.47] + [0.3] * 10,  # stalls; one unknown frame
        3: (1.0 - np.cumsum(rng.uniform(0.0, 0.05, 25))).tolist(),
    }
    expected = _lerobot_rabc_reference(progress, chunk)
    arrays = [np.asarray(v) for v in progress.values()]
    deltas = progress_deltas(arrays, chunk)
    assert np.nanmean(deltas) < 0  # the clamp of mu at 0 matters here
    np.testing.assert_allclose(rabc_weights(deltas), expected, rtol=0, atol=1e-12)
    from lc_robotics_reward.rabc import RABCWeighter

    weighter = RABCWeighter.from_episodes(arrays, chunk_size=chunk)
    np.testing.assert_allclose(weighter.weights, expected, rtol=0, atol=1e-12)


def test_constant_progress_uses_eps_as_sigma() -> None:
    # every delta 0: LeRobot's sigma is eps, so the soft weight is 2 eps / (5 eps) = 0.4
    w = rabc_weights(progress_deltas(np.full(6, 0.3), 2))
    np.testing.assert_allclose(w, 0.4)


def test_weighter_reads_lerobot_progress_parquet_and_normalises_batches(tmp_path) -> None:
    from lc_robotics_reward.rabc import RABCWeighter, write_progress

    episodes = [np.array([0.0, 0.2, 0.2, 0.1]), np.array([0.5, 0.5, 0.9])]
    path = write_progress(tmp_path / "sarm_progress.parquet", episodes)
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    assert table.column_names == ["index", "episode_index", "frame_index", "progress_sparse"]
    weighter = RABCWeighter.from_parquet(path, chunk_size=1)
    expected = _lerobot_rabc_reference({i: e.tolist() for i, e in enumerate(episodes)}, 1)
    np.testing.assert_allclose(weighter.weights, expected, atol=1e-6)
    w, stats = weighter.compute_batch_weights({"index": torch.tensor([0, 2, 6, 3])})
    raw = np.array([expected[i] for i in (0, 2, 6, 3)])
    np.testing.assert_allclose(w.numpy(), raw * 4 / (raw.sum() + 1e-6), rtol=1e-5)
    assert stats["num_zero_weight"] == int((raw == 0).sum())
    assert weighter.get_stats()["chunk_size"] == 1
    with pytest.raises(ValueError, match="progress_dense"):
        RABCWeighter.from_parquet(path, head_mode="dense")
    with pytest.raises(KeyError, match="frame index 99"):
        weighter.weights_for([99])
