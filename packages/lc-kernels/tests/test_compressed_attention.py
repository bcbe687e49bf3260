"""Compression branch, block scoring, top-k selection and sliding-window attention."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lck_helpers import rel_rms

from lc_kernels import (
    compressed_attention,
    dense_causal_attention_reference,
    mean_pool_compress,
    select_blocks,
    selected_attention,
    sliding_window_attention,
)
from lc_kernels.compressed_attention import block_scores_reference

torch.set_num_threads(1)


def _rand(seed, *shape, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def test_mean_pool_matches_explicit_spans():
    x = _rand(0, 2, 70, 3, 5)
    got = mean_pool_compress(x, 32, 16)
    assert got.shape == (2, 3, 3, 5)
    for c in range(3):
        torch.testing.assert_close(got[:, c], x[:, 16 * c : 16 * c + 32].mean(1))
    assert mean_pool_compress(x[:, :31], 32, 16).shape[1] == 0


def _brute_compressed(q, kc, vc, ks, st_, scale):
    b, t, hq, _d = q.shape
    g = hq // kc.shape[2]
    out = torch.zeros_like(q)
    probs = torch.zeros(b, t, hq, kc.shape[1], dtype=q.dtype)
    for ti in range(t):
        vis = [c for c in range(kc.shape[1]) if c * st_ + ks - 1 <= ti]
        if not vis:
            continue
        for h in range(hq):
            s = torch.stack([(q[:, ti, h] * kc[:, c, h // g]).sum(-1) * scale for c in vis], -1)
            p = torch.softmax(s, -1)
            probs[:, ti, h, vis] = p
            out[:, ti, h] = sum(p[:, i, None] * vc[:, c, h // g] for i, c in enumerate(vis))
    return out, probs


def test_compressed_attention_matches_brute_force():
    q, k, v = _rand(1, 1, 41, 4, 6), _rand(2, 1, 41, 2, 6), _rand(3, 1, 41, 2, 6)
    kc, vc = mean_pool_compress(k, 8, 4), mean_pool_compress(v, 8, 4)
    got = compressed_attention(q, kc, vc, 8, 4, scale=0.5)
    ref, _ = _brute_compressed(q, kc, vc, 8, 4, 0.5)
    torch.testing.assert_close(got, ref)
    assert (got[:, :7] == 0).all()


def test_block_scores_spread_over_overlapping_blocks_and_sum_over_the_group():
    q, k = _rand(4, 1, 50, 6, 4), _rand(5, 1, 50, 2, 4)
    kc = mean_pool_compress(k, 8, 4)
    _, probs = _brute_compressed(q, kc, kc, 8, 4, 0.5)
    got = block_scores_reference(q, kc, 8, 4, 16, 0.5)
    nb = 4
    ref = torch.zeros(1, 50, 2, nb)
    for c in range(kc.shape[1]):
        for j in range(nb):
            if c * 4 < (j + 1) * 16 and c * 4 + 8 > j * 16:
                ref[..., j] += probs[..., c].view(1, 50, 2, 3).sum(-1).float()
    torch.testing.assert_close(got, ref)


def test_selection_forces_initial_and_local_blocks_and_excludes_future():
    q, k = _rand(6, 1, 300, 4, 8, dtype=torch.float32), _rand(7, 1, 300, 2, 8, dtype=torch.float32)
    idx = select_blocks(q, mean_pool_compress(k, 32, 16), block_size=64, top_k=4)
    assert idx.shape == (1, 300, 2, 4)
    assert idx.dtype == torch.int32
    own = (torch.arange(300) // 64).view(1, 300, 1, 1)
    valid = idx >= 0
    assert (idx[valid] <= own.expand_as(idx)[valid]).all()
    sel = [set(row.tolist()) - {-1} for row in idx[0, :, 0]]
    for t in range(300):
        o = t // 64
        assert {0, o, max(o - 1, 0)} <= sel[t]
        assert len(sel[t]) == min(4, o + 1)


def test_compressed_attention_can_return_the_selection_too():
    q, k = _rand(12, 1, 130, 4, 8), _rand(13, 1, 130, 2, 8)
    kc = mean_pool_compress(k, 32, 16)
    o, idx = compressed_attention(q, kc, kc, 32, 16, top_k=2, block_size=64)
    torch.testing.assert_close(o, compressed_attention(q, kc, kc, 32, 16))
    assert torch.equal(idx, select_blocks(q, kc, block_size=64, top_k=2))


def test_selection_finds_the_block_a_query_matches():
    t, d = 256, 16
    q = torch.zeros(1, t, 2, d)
    k = 0.01 * _rand(8, 1, t, 1, d, dtype=torch.float32)
    k[0, 130:146, 0, 0] = 5.0  # block 2 holds keys aligned with the last query
    q[0, -1, :, 0] = 5.0
    idx = select_blocks(q, mean_pool_compress(k, 32, 16), block_size=64, top_k=4, local_blocks=1)
    assert 2 in idx[0, -1, 0].tolist()
    idx_no = select_blocks(q, mean_pool_compress(k, 32, 16), block_size=64, top_k=3, local_blocks=1)
    assert set(idx_no[0, -1, 0].tolist()) == {0, 2, 3}


@settings(max_examples=5)
@given(t=st.integers(1, 200), g=st.sampled_from([1, 3]), seed=st.integers(0, 999))
def test_property_selecting_enough_blocks_is_dense_causal(t, g, seed):
    q, k, v = _rand(seed, 1, t, g, 8), _rand(seed + 1, 1, t, 1, 8), _rand(seed + 2, 1, t, 1, 8)
    kc = mean_pool_compress(k, 16, 8)
    nb = -(-t // 32)
    idx = select_blocks(q, kc, block_size=32, top_k=nb, kernel_size=16, stride=8)
    out = selected_attention(q, k, v, idx, block_size=32, backend="torch")
    assert rel_rms(out, dense_causal_attention_reference(q, k, v, 8**-0.5)) < 1e-12


def test_compression_bad_input():
    q, k = torch.randn(1, 64, 4, 8), torch.randn(1, 64, 2, 8)
    kc = mean_pool_compress(k)
    with pytest.raises(ValueError, match="compressed tokens"):
        compressed_attention(q, kc[:, :1], kc[:, :1])
    with pytest.raises(ValueError, match="mismatched heads"):
        compressed_attention(q[:, :, :3].contiguous(), kc, kc)
    with pytest.raises(ValueError, match="stride"):
        select_blocks(q, kc, kernel_size=8, stride=16)
    with pytest.raises(ValueError, match="multiple of stride"):
        select_blocks(q, kc, block_size=40)
    with pytest.raises(ValueError, match="top_k"):
        select_blocks(q, kc, top_k=0)


def test_sliding_window_matches_masked_dense_attention():
    t, w = 300, 37
    q, k, v = _rand(9, 1, t, 4, 8), _rand(10, 1, t, 2, 8), _rand(11, 1, t, 2, 8)
    got = sliding_window_attention(q, k, v, window=w)
    s = torch.einsum("bthd,bshd->bhts", q, k.repeat_interleave(2, 2)) * 8**-0.5
    i = torch.arange(t)
    band = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - w)
    ref = torch.einsum(
        "bhts,bshd->bthd",
        s.masked_fill(~band, float("-inf")).softmax(-1),
        v.repeat_interleave(2, 2),
    )
    torch.testing.assert_close(got, ref)
    full = sliding_window_attention(q, k, v, window=t)
    torch.testing.assert_close(full, dense_causal_attention_reference(q, k, v, 8**-0.5))
    cu = torch.tensor([0, 100, 300])
    packed = sliding_window_attention(q, k, v, window=w, cu_seqlens=cu)
    torch.testing.assert_close(
        packed[:, 100:], sliding_window_attention(q[:, 100:], k[:, 100:], v[:, 100:], window=w)
    )
    with pytest.raises(ValueError, match="window"):
        sliding_window_attention(q, k, v, window=0)
