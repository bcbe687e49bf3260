"""DSSA with a budget that grows with the context (``DSSAConfig.topk_fraction``)."""

from __future__ import annotations

import math

import pytest
import torch

from lc_attention.dssa import (
    CompressedKeyCache,
    DSSAConfig,
    compress_keys,
    dssa_attention,
    select_blocks,
    select_group_blocks,
)
from lc_attention.dssa.selection import first_full_group, group_budgets
from lc_kernels.selected_attention.reference import selected_attention_reference

torch.set_num_threads(1)

# 8 blocks of 32 keys, sparse from 64 keys, 3 forced (1 initial, 2 local) of at least 4;
# spans of 8 keys that do not overlap, so no two blocks share a span (and tie)
BASE = {
    "block_size": 32,
    "window_size": 64,
    "topk": 4,
    "dense_len": 64,
    "stride": 8,
    "kernel_size": 8,
}


def _qkv(s: int, hq: int = 4, hkv: int = 2, d: int = 16, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, s, h, d, generator=g) for h in (hq, hkv, hkv))


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "0.25", float("nan")])
def test_bad_fraction_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="topk_fraction"):
        DSSAConfig.small(topk_fraction=bad)


def test_budget_is_the_fraction_of_the_visible_blocks_never_below_topk() -> None:
    cfg = DSSAConfig.small(topk_fraction=0.25)
    assert [cfg.budget(n) for n in (1, 64, 65, 128, 129, 512)] == [16, 16, 17, 32, 33, 128]
    assert DSSAConfig.small().budget(512) == 16  # off: the fixed top-k
    assert DSSAConfig.small(topk_fraction=1.0).budget(300) == 300
    # 0.1 * 30 is 3.0000000000000004 in floating point: still 3
    assert DSSAConfig(topk=1, window_size=0, init_blocks=1, topk_fraction=0.1).budget(30) == 3


def test_group_budgets_and_first_full_group() -> None:
    cfg = DSSAConfig.small(query_block=64, topk_fraction=0.25)  # one group per block
    lim = group_budgets(0, 8192, cfg)
    assert lim.tolist() == [max(16, math.ceil((m + 1) / 4)) for m in range(128)]
    assert first_full_group(0, 8192, cfg) == 124  # budget 32 from 125 visible blocks
    assert first_full_group(0, 8192, DSSAConfig.small(query_block=64)) == 15
    per_query = DSSAConfig.small(topk_fraction=0.25)
    assert group_budgets(1000, 3, per_query).tolist() == [16, 16, 16]


@pytest.mark.parametrize("qb", [1, 8])
def test_each_query_keeps_the_best_blocks_of_its_own_budget(qb: int) -> None:
    """A query (group) with budget k picks what a fixed ``topk=k`` config picks."""
    q, k, _ = _qkv(256, seed=1)
    cfg = DSSAConfig(**BASE, query_block=qb, topk_fraction=0.75)
    idx = select_blocks(q, compress_keys(k, cfg), 0, 256, cfg, 0.25)
    assert idx.shape[-1] == cfg.budget(8) == 6
    for t in range(0, 256, 7):
        n_seen = t // 32 + 1
        budget = cfg.budget(((t // qb + 1) * qb - 1) // 32 + 1)
        fixed = DSSAConfig(**{**BASE, "topk": budget}, query_block=qb)
        ref = select_blocks(q, compress_keys(k, fixed), 0, 256, fixed, 0.25)[0, t]
        for h in range(2):
            got = sorted(i for i in idx[0, t, h].tolist() if i >= 0)
            assert len(got) == min(budget, n_seen)
            assert got == sorted(i for i in ref[h].tolist() if i >= 0)


def test_same_budget_in_one_pass_in_chunks_and_in_decode() -> None:
    """Chunked prefill and decode steps select what one pass selects for those rows."""
    q, k, _ = _qkv(256, seed=2)
    cfg = DSSAConfig(**BASE, topk_fraction=0.6)
    k_cmp = compress_keys(k, cfg)
    full = select_group_blocks(q, k_cmp, 0, 256, cfg, 0.25)
    for a, e in [(100, 200), (200, 256), (255, 256)]:
        part = select_group_blocks(q[:, a:e], compress_keys(k[:, :e], cfg), a, e, cfg, 0.25)
        assert part.shape[-1] == cfg.budget((e - 1) // 32 + 1)
        width = full.shape[-1] - part.shape[-1]
        padded = torch.cat([part, part.new_full((*part.shape[:3], width), -1)], -1)
        assert torch.equal(padded.sort(-1).values, full[:, a:e].sort(-1).values)


@pytest.mark.parametrize(
    ("qb", "grad", "t"),
    [(1, False, 256), (1, True, 256), (8, False, 256), (8, False, 120), (1, False, 3)],
)
def test_attention_equals_the_reference_on_its_selection(qb: int, grad: bool, t: int) -> None:
    """Every stage-2 path (block-major, tiled, grouped, decode gather) honours the budget."""
    q, k, v = _qkv(256, seed=3)
    cfg = DSSAConfig(**BASE, query_block=qb, topk_fraction=0.6)
    start = 256 - t
    with torch.no_grad():
        idx = select_blocks(q, compress_keys(k, cfg), 0, 256, cfg, 0.25)
    q_ref = q.clone().requires_grad_(grad)
    q = q.clone().requires_grad_(grad)
    out = dssa_attention(q[:, start:], k, v, cfg)
    ref = selected_attention_reference(q_ref, k, v, idx, 32, 0.25)[:, start:]
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    if grad:  # the tiled path, with a gradient
        out.square().sum().backward()
        ref.square().sum().backward()
        torch.testing.assert_close(q.grad, q_ref.grad, rtol=1e-4, atol=1e-5)


def test_budget_reaches_more_blocks_than_topk_alone() -> None:
    """The fraction is not a no-op: late queries read more keys than ``topk`` allows."""
    q, k, v = _qkv(256, seed=4)
    fixed = DSSAConfig(**BASE)
    grown = DSSAConfig(**BASE, topk_fraction=1.0)  # every visible block: dense
    dense = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True
    ).transpose(1, 2)
    torch.testing.assert_close(dssa_attention(q, k, v, grown), dense, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(dssa_attention(q, k, v, fixed), dense, atol=1e-3)


def test_decode_steps_with_the_cache_grow_the_budget() -> None:
    q, k, v = _qkv(260, seed=5)
    cfg = DSSAConfig(**BASE, topk_fraction=0.5)
    cache = CompressedKeyCache()
    dssa_attention(q[:, :200], k[:, :200], v[:, :200], cfg, cache=cache)
    for s in range(201, 261, 13):
        got = dssa_attention(q[:, s - 1 : s], k[:, :s], v[:, :s], cfg, cache=cache)
        ref = dssa_attention(q[:, s - 1 : s], k[:, :s], v[:, :s], cfg)
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
        idx = select_blocks(q[:, s - 1 : s], compress_keys(k[:, :s], cfg), s - 1, s, cfg, 0.25)
        assert idx.shape[-1] == cfg.budget((s - 1) // 32 + 1)
