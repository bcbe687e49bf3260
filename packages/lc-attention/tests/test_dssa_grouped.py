"""DSSA prefill with a selection shared by query groups, and no host reads on a device."""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import (
    CompressedKeyCache,
    DSSAConfig,
    block_major_selected_attention,
    compress_keys,
    dense_attention,
    dssa_attention,
    select_blocks,
    select_group_blocks,
)
from lc_kernels.compressed_attention.reference import block_overlap
from lc_kernels.selected_attention.reference import selected_attention_reference

torch.set_num_threads(1)


def _qkv(t: int, hq: int = 6, hkv: int = 2, d: int = 16, seed: int = 0, b: int = 1):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, t, h, d, generator=g) for h in (hq, hkv, hkv))


def _group_selection(b, ng, hkv, k, g0, group, block, seed):
    """Random distinct block ids per group: own block, earlier blocks, ``-1`` fillers."""
    gen = torch.Generator().manual_seed(seed)
    idx = torch.full((b, ng, hkv, k), -1, dtype=torch.int32)
    for bi in range(b):
        for i in range(ng):
            own = (g0 + i) * group // block
            for h in range(hkv):
                earlier = torch.randperm(own, generator=gen)[: k - 1].tolist() if own else []
                ids = [own, *earlier]
                perm = torch.randperm(k, generator=gen)  # slots in any order
                for slot, blk in zip(perm.tolist(), ids, strict=False):
                    idx[bi, i, h, slot] = blk
    return idx


def _reference_suffix(q_full, k, v, idx, start, scale):
    """Reference for the queries from ``start`` on (earlier rows attend to their block)."""
    b, _, hkv, n = idx.shape
    own = (torch.arange(start) // 64).view(1, start, 1, 1).int().expand(b, start, hkv, 1)
    head = torch.cat([own, own.new_full((b, start, hkv, n - 1), -1)], -1)
    full = selected_attention_reference(q_full, k, v, torch.cat([head, idx], 1), 64, scale)
    return full[:, start:]


@pytest.mark.parametrize(
    ("start", "t", "group", "k"),
    [(0, 333, 64, 3), (260, 140, 64, 3), (37, 300, 16, 4), (100, 230, 32, 2), (0, 200, 64, 8)],
)
def test_grouped_attention_equals_reference(start: int, t: int, group: int, k: int) -> None:
    """Exact masked softmax over each group's blocks: aligned or cut groups, fillers."""
    s = start + t
    q, kk, v = _qkv(s, b=2, seed=start + t)
    g0 = start // group
    ng = (s - 1) // group - g0 + 1
    idx = _group_selection(2, ng, 2, k, g0, group, 64, seed=t)
    got = block_major_selected_attention(
        q[:, start:], kk, v, idx, start, 64, 0.3, 1, 1, query_block=group
    )
    gid = torch.arange(start, s) // group - g0
    ref = _reference_suffix(q, kk, v, idx[:, gid], start, 0.3)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_grouped_attention_rejects_bad_shapes() -> None:
    q, k, v = _qkv(128)
    idx = torch.zeros(1, 3, 2, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match="idx"):
        block_major_selected_attention(q, k, v, idx, 0, 64, 0.3, 1, 1, query_block=64)
    with pytest.raises(ValueError, match="group"):
        block_major_selected_attention(q, k, v, idx, 0, 64, 0.3, 1, 1, query_block=48)


def _brute_group_scores(q, kc, first, last, h, g, scale, nb):
    """float64 sum over the positions [first, last] and the G heads, max-pooled."""
    c = kc.shape[1]
    ends = torch.arange(c) * 16 + 31
    tot = torch.zeros(c, dtype=torch.float64)
    for p in range(first, last + 1):
        vis = ends <= p
        if not vis.any():
            continue
        for gi in range(g):
            sc = (kc[0, :, h].double() @ q[0, p - first, h * g + gi].double()) * scale
            tot += torch.softmax(sc.masked_fill(~vis, float("-inf")), 0)
    over = block_overlap(c, nb, 32, 16, 64, q.device).bool()
    return [float(tot[over[:, j]].max()) if over[:, j].any() else 0.0 for j in range(nb)]


@pytest.mark.parametrize(("start", "query_block"), [(37, 16), (70, 64), (0, 32)])
def test_group_selection_matches_brute_force_for_cut_groups(start: int, query_block: int) -> None:
    """Groups cut by the first query sum only the queries present; ties allowed."""
    cfg = DSSAConfig(window_size=64, topk=3, dense_len=0, query_block=query_block)
    s = 420
    q, k, _ = _qkv(s, seed=11)
    q = q[:, start:]
    kc = compress_keys(k, cfg)
    idx = select_group_blocks(q, kc, start, s, cfg, 0.25)
    g0 = start // query_block
    assert idx.shape[1] == (s - 1) // query_block - g0 + 1
    nb = -(-s // 64)
    for i in (0, 1, idx.shape[1] - 1):  # the cut first group, a whole one, the last
        first = max(start, (g0 + i) * query_block)
        last = min(s - 1, (g0 + i + 1) * query_block - 1)
        own = last // 64
        for h in range(2):
            score = _brute_group_scores(q[:, first - start :], kc, first, last, h, 3, 0.25, nb)
            got = {int(j) for j in idx[0, i, h] if j >= 0}
            forced = {0, own}
            assert forced <= got
            assert max(got) <= own
            free = sorted((score[j] for j in range(1, own)), reverse=True)
            chosen = sorted((score[j] for j in got - forced), reverse=True)
            assert chosen == pytest.approx(free[: len(chosen)], rel=1e-5)
            assert len(got) == min(3, own + 1)
    # the per-query form repeats each group's row
    per_query = select_blocks(q, kc, torch.arange(start, s), s, cfg, 0.25)
    gid = torch.arange(start, s) // query_block - g0
    assert torch.equal(per_query, idx[:, gid])


@pytest.mark.parametrize("query_block", [16, 64])
def test_dssa_grouped_path_equals_reference_math(query_block: int) -> None:
    """Full and chunked prefill through the grouped path equal the per-query reference."""
    cfg = DSSAConfig(window_size=64, topk=3, dense_len=128, backend="torch",
                     query_block=query_block)  # fmt: skip
    q, k, v = _qkv(400, seed=12)
    for t in (400, 150):
        start = 400 - t
        idx = select_blocks(q[:, start:], compress_keys(k, cfg), start, 400, cfg, 0.25)
        ref = _reference_suffix(q, k, v, idx, start, 0.25)
        got = dssa_attention(q[:, start:], k, v, cfg, scale=0.25)
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_no_host_reads_on_a_device() -> None:
    """On the meta device any read of a value raises: the paths run without one.

    Covered: stage-1 selection, the grouped prefill (full and chunked), decode steps
    with the compressed-key cache (incremental and device-side check), and the dense
    fallback below ``dense_len``.
    """
    cfg = DSSAConfig(kernel_size=32, stride=16, init_blocks=1, block_size=64, window_size=64,
                     topk=3, dense_len=128, backend="torch", query_block=64)  # fmt: skip
    q = torch.randn(2, 300, 6, 16, device="meta")
    k = torch.randn(2, 300, 2, 16, device="meta")
    assert dssa_attention(q, k, k, cfg).shape == (2, 300, 6, 16)
    assert dssa_attention(q[:, -70:], k, k, cfg).shape == (2, 70, 6, 16)
    assert dssa_attention(q[:, :100], k[:, :100], k[:, :100], cfg).shape == (2, 100, 6, 16)
    cache = CompressedKeyCache()
    for s in range(280, 300):
        out = dssa_attention(q[:, s - 1 : s], k[:, :s], k[:, :s], cfg, cache=cache)
        assert out.shape == (2, 1, 6, 16)
    assert cache.full_recomputes == 1  # decided once on the host (no cache yet)
    with pytest.raises((RuntimeError, NotImplementedError)):
        int(k.sum())  # the meta device really refuses host reads


def test_device_side_cache_check_equals_recomputation() -> None:
    """The check that picks extended or recomputed keys on the device (as on a GPU)."""
    cfg = DSSAConfig.small()
    _, k, _ = _qkv(400, seed=13)
    _, other, _ = _qkv(400, seed=14)
    cache = CompressedKeyCache(host_check=False)
    cache.update(k[:, :200], cfg)
    for s in range(201, 400, 7):
        torch.testing.assert_close(cache.update(k[:, :s], cfg), compress_keys(k[:, :s], cfg))
    torch.testing.assert_close(cache.update(other, cfg), compress_keys(other, cfg))
    assert cache.full_recomputes == 1  # the rest was decided on the device


def test_prefill_resets_the_cache() -> None:
    """A prefill (no past keys) starts a new sequence even when the cache would extend."""
    cfg = DSSAConfig(window_size=64, topk=3, dense_len=128, query_block=64)
    q, k, v = _qkv(300, seed=15)
    q2, k2, v2 = _qkv(320, seed=16)
    cache = CompressedKeyCache(host_check=False)
    dssa_attention(q, k, v, cfg, cache=cache)
    out = dssa_attention(q2, k2, v2, cfg, cache=cache)
    torch.testing.assert_close(cache.k_cmp, compress_keys(k2, cfg))
    torch.testing.assert_close(out, dssa_attention(q2, k2, v2, cfg))
    assert not torch.equal(out, dense_attention(q2, k2, v2))


@pytest.mark.parametrize(("start", "t", "group"), [(0, 200, 64), (37, 300, 16)])
def test_grouped_attention_gradients_equal_reference(start: int, t: int, group: int) -> None:
    """The grouped path is differentiable: dq, dk, dv match the reference's."""
    s = start + t
    q, kk, v = (x.requires_grad_() for x in _qkv(s, seed=s))
    g0 = start // group
    ng = (s - 1) // group - g0 + 1
    idx = _group_selection(1, ng, 2, 3, g0, group, 64, seed=t)
    w = torch.randn(1, t, 6, 16, generator=torch.Generator().manual_seed(1))
    got = block_major_selected_attention(
        q[:, start:], kk, v, idx, start, 64, 0.3, 1, 1, query_block=group
    )
    grads = torch.autograd.grad((got * w).sum(), (q, kk, v))
    gid = torch.arange(start, s) // group - g0
    ref = _reference_suffix(q, kk, v, idx[:, gid], start, 0.3)
    ref_grads = torch.autograd.grad((ref * w).sum(), (q, kk, v))
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_dssa_gradients_equal_dense_when_every_block_is_selected() -> None:
    """Fine-tuning with DSSA on: with every block selected, the gradients are dense's."""
    cfg = DSSAConfig.small(dense_len=128, window_size=64, topk=8, query_block=64)
    q, k, v = (x.requires_grad_() for x in _qkv(300, seed=3))
    w = torch.randn(1, 300, 6, 16, generator=torch.Generator().manual_seed(2))
    got = torch.autograd.grad((dssa_attention(q, k, v, cfg) * w).sum(), (q, k, v))
    ref = torch.autograd.grad((dense_attention(q, k, v) * w).sum(), (q, k, v))
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
