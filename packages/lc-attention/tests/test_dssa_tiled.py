"""DSSA CPU prefill: tiled block-sparse attention and selection shared by query blocks."""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import (
    DSSAConfig,
    block_scores,
    compress_keys,
    dense_attention,
    dssa_attention,
    select_blocks,
)
from lc_attention.dssa.sparse import block_major_selected_attention
from lc_kernels.compressed_attention.reference import block_overlap
from lc_kernels.selected_attention.reference import selected_attention_reference

torch.set_num_threads(1)

SHARED = DSSAConfig(kernel_size=32, stride=16, init_blocks=1, block_size=64, window_size=64,
                    topk=3, dense_len=128, backend="torch", query_block=64)  # fmt: skip


def _qkv(t: int = 300, hq: int = 6, hkv: int = 2, d: int = 16, seed: int = 0, b: int = 1):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, t, hq, d, generator=g)
    k = torch.randn(b, t, hkv, d, generator=g)
    v = torch.randn(b, t, hkv, d, generator=g)
    return q, k, v


def _masked_reference(q, k, v, idx, positions, block, scale, pad=None):
    """Softmax over exactly the keys each query may see, one query at a time."""
    b, t, hq, _ = q.shape
    s, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    out = torch.zeros_like(q)
    for bi in range(b):
        for ti in range(t):
            for h in range(hkv):
                blocks = {int(i) for i in idx[bi, ti, h] if i >= 0}
                keys = [j for j in range(s) if j // block in blocks and j <= positions[ti]]
                if pad is not None:
                    keys = [j for j in keys if pad[bi, 0, ti, j]]
                if not keys:
                    continue
                kk = torch.tensor(keys)
                for gi in range(g):
                    p = torch.softmax((k[bi, kk, h] @ q[bi, ti, h * g + gi]) * scale, 0)
                    out[bi, ti, h * g + gi] = p @ v[bi, kk, h]
    return out


@pytest.mark.parametrize("tile", [16, 64])
def test_tiled_equals_reference_for_random_per_query_selection(tile: int) -> None:
    """Union gathering per tile is exact for arbitrary per-query block ids."""
    q, k, v = _qkv(t=203, b=2, seed=1)
    g = torch.Generator().manual_seed(2)
    nb = -(-203 // 32)
    idx = torch.randint(-1, nb, (2, 203, 2, 3), generator=g).int()  # -1s and duplicates
    idx[..., 0] = (torch.arange(203) // 32).view(1, 203, 1).int()  # own block
    got = block_major_selected_attention(q, k, v, idx, 0, 32, 0.3, 1, 1, chunk=tile)
    ref = selected_attention_reference(q, k, v, idx, 32, 0.3)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_tiled_suffix_queries_and_padding_mask() -> None:
    """Queries at the end of the keys (chunked prefill) with a left-padding mask."""
    q, k, v = _qkv(t=160, seed=3)
    t0 = 90
    pos = torch.arange(t0, 160)
    g = torch.Generator().manual_seed(4)
    idx = torch.randint(-1, 5, (1, 70, 2, 2), generator=g).int()
    pad = torch.ones(1, 1, 70, 160, dtype=torch.bool)
    pad[..., :40] = False  # every key of block 0 is padding: some queries see nothing
    got = block_major_selected_attention(
        q[:, t0:], k, v, idx, t0, 32, 0.25, 1, 1, chunk=16, allowed_pad=pad
    )
    ref = _masked_reference(q[:, t0:], k, v, idx, pos, 32, 0.25, pad)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert got.isfinite().all()


def test_shared_selection_is_constant_per_query_block_and_brute_force() -> None:
    q, k, _ = _qkv(t=400, seed=5)
    kc = compress_keys(k, SHARED)
    pos = torch.arange(400)
    idx = select_blocks(q, kc, pos, 400, SHARED, 0.25)
    for a in range(0, 400, 64):
        grp = idx[0, a : a + 64]
        assert (grp == grp[:1]).all()
    # brute force: sum over the block's queries of the group-summed compressed-key
    # probabilities, max-pooled onto blocks, forced init/local, no future, top-k
    c = kc.shape[1]
    ends = torch.arange(c) * 16 + 31
    over = block_overlap(c, 7, 32, 16, 64, q.device).bool()
    for qb in (2, 4, 6):
        for h in range(2):
            tot = torch.zeros(c)
            for t in range(qb * 64, min(400, qb * 64 + 64)):
                vis = ends <= t
                for gi in range(3):
                    sc = (kc[0, :, h] @ q[0, t, h * 3 + gi]) * 0.25
                    tot += torch.softmax(sc.masked_fill(~vis, float("-inf")), 0)
            score = torch.tensor([tot[over[:, j]].max() if over[:, j].any() else 0.0
                                  for j in range(7)])  # fmt: skip
            forced = {0, qb}
            got = {int(i) for i in idx[0, qb * 64, h]}
            assert forced <= got
            assert max(got) <= qb
            free = sorted((float(score[j]) for j in range(1, qb)), reverse=True)
            chosen = sorted((float(score[j]) for j in got - forced), reverse=True)
            assert chosen == pytest.approx(free[: 3 - len(forced)], rel=1e-5)  # ties allowed


def test_shared_selection_attention_equals_reference_math() -> None:
    """The fast path equals masked softmax over each query's (shared) blocks."""
    q, k, v = _qkv(t=333, seed=6)
    idx = select_blocks(q, compress_keys(k, SHARED), torch.arange(333), 333, SHARED, 0.25)
    ref = selected_attention_reference(q, k, v, idx, 64, 0.25)
    torch.testing.assert_close(dssa_attention(q, k, v, SHARED), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("query_block", [1, 16, 64])
def test_every_block_selected_equals_dense(query_block: int) -> None:
    cfg = DSSAConfig(window_size=64, topk=64, dense_len=0, backend="torch",
                     query_block=query_block)  # fmt: skip
    q, k, v = _qkv(t=300, seed=7)
    torch.testing.assert_close(dssa_attention(q, k, v, cfg), dense_attention(q, k, v))
    # chunked prefill: the last 40 queries over all 300 keys
    torch.testing.assert_close(
        dssa_attention(q[:, -40:], k, v, cfg), dense_attention(q, k, v)[:, -40:]
    )


def test_block_scores_do_not_depend_on_chunking() -> None:
    q, k, _ = _qkv(t=260, seed=8)
    cfg = DSSAConfig(window_size=0, topk=2, dense_len=0)
    kc = compress_keys(k, cfg)
    full = block_scores(q, kc, torch.arange(260), 260, cfg, 0.25)
    part = block_scores(q[:, 37:], kc, torch.arange(37, 260), 260, cfg, 0.25, chunk=24)
    torch.testing.assert_close(part, full[:, 37:])
    assert (full[:, :31] == 0).all()  # before the first complete span nothing is visible


def test_query_block_must_divide_block_size() -> None:
    with pytest.raises(ValueError, match="query_block"):
        DSSAConfig(query_block=48)
    with pytest.raises(ValueError, match="query_block"):
        DSSAConfig(query_block=0)
