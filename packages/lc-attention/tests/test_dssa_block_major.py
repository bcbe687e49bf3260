"""DSSA CPU prefill with per-query selection: block-major selected attention."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lc_attention.dssa.attention as dssa_mod
from lc_attention.dssa import DSSAConfig, compress_keys, dssa_attention
from lc_attention.dssa.selection import select_group_blocks
from lc_attention.dssa.sparse import attention_with_lse, block_major_selected_attention
from lc_kernels.selected_attention.reference import selected_attention_reference

torch.set_num_threads(1)


def _qkv(s: int, hq: int, hkv: int, d: int = 16, b: int = 1, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, s, hq, d, generator=g)
    k = torch.randn(b, s, hkv, d, generator=g)
    v = torch.randn(b, s, hkv, d, generator=g)
    return q, k, v


def _random_ids(b: int, s: int, hkv: int, n_slots: int, block: int, seed: int) -> torch.Tensor:
    """Per-query ids with unused slots, duplicates and future blocks, own block mostly in."""
    g = torch.Generator().manual_seed(seed)
    nb = -(-s // block)
    idx = torch.randint(-1, nb, (b, s, hkv, n_slots), generator=g)
    own = (torch.arange(s) // block).view(1, s, 1)
    keep_own = torch.rand(b, s, hkv, generator=g) < 0.8
    idx[..., 0] = torch.where(keep_own, own, idx[..., 0])
    return idx.int()


def _reference(q, k, v, idx_full, block, scale, start):
    """Dense masked softmax over every query's blocks; rows of the last T queries."""
    return selected_attention_reference(q, k, v, idx_full, block, scale)[:, start:]


@pytest.mark.parametrize(
    ("hq", "hkv", "init", "local", "chunk"),
    [(6, 2, 1, 2, 64), (4, 1, 1, 1, 4), (3, 3, 2, 3, 8), (6, 2, 0, 0, 16)],
)
def test_equals_reference_for_random_per_query_ids(hq, hkv, init, local, chunk) -> None:
    """Exact for arbitrary ids: forced blocks missing, -1s, duplicates, future blocks."""
    q, k, v = _qkv(203, hq, hkv, b=2, seed=1)
    idx = _random_ids(2, 203, hkv, 4, 32, seed=2)
    got = block_major_selected_attention(q, k, v, idx, 0, 32, 0.3, init, local, chunk=chunk)
    torch.testing.assert_close(got, _reference(q, k, v, idx, 32, 0.3, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("start", [90, 96, 159])
def test_suffix_queries(start: int) -> None:
    """Queries at the end of the keys (chunked prefill), tiles cut at either end."""
    q, k, v = _qkv(160, 6, 2, seed=3)
    idx = _random_ids(1, 160, 2, 3, 32, seed=4)
    got = block_major_selected_attention(
        q[:, start:], k, v, idx[:, start:], start, 32, 0.25, 1, 2, chunk=4
    )
    torch.testing.assert_close(got, _reference(q, k, v, idx, 32, 0.25, start), rtol=1e-5, atol=1e-5)


def test_dssa_selection_equals_tiled_path() -> None:
    """On DSSA's own per-query selection (4-token spans) it matches the tiled path."""
    cfg = DSSAConfig.training_free(dense_len=0, window_size=128, topk=8)
    q, k, v = _qkv(1100, 6, 2, b=2, seed=5)
    idx = select_group_blocks(q, compress_keys(k, cfg), 0, 1100, cfg, 0.25)
    got = block_major_selected_attention(q, k, v, idx, 0, 64, 0.25, 1, cfg.local_blocks)
    ref = selected_attention_reference(q, k, v, idx, 64, 0.25)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_query_with_nothing_selected_gets_zero() -> None:
    q, k, v = _qkv(128, 4, 2, seed=6)
    idx = _random_ids(1, 128, 2, 3, 32, seed=7)
    idx[0, 70, 1] = -1  # nothing at all for one query and KV head
    idx[0, 100, 0] = torch.tensor([0, 1, -1]).int()  # only earlier, non-forced blocks
    got = block_major_selected_attention(q, k, v, idx, 0, 32, 0.3, 0, 1, chunk=8)
    assert got.isfinite().all()
    assert got[0, 70, 2:].abs().max() == 0
    torch.testing.assert_close(got, _reference(q, k, v, idx, 32, 0.3, 0), rtol=1e-5, atol=1e-5)


def test_merge_survives_logit_gaps_beyond_float32_exp_range() -> None:
    """A far block with logits ~300 above the forced ones: the running maximum moves."""
    q, k, v = _qkv(256, 2, 1, d=8, seed=8)
    q[0, 200:, :, 0] = 30.0
    k[0, 64:128, 0, 0] = 40.0  # block 1: logits ~ 30 * 40 * 0.3 = 360 larger
    k[0, 192:, 0, 0] = -1.0
    idx = torch.tensor([0, 1, 2, 3]).expand(1, 256, 1, 4).clone().int()
    got = block_major_selected_attention(q, k, v, idx, 0, 64, 0.3, 1, 1, chunk=16)
    assert got.isfinite().all()
    torch.testing.assert_close(got, _reference(q, k, v, idx, 64, 0.3, 0), rtol=1e-5, atol=1e-5)


def test_bfloat16_inputs() -> None:
    q, k, v = _qkv(200, 6, 2, seed=9)
    idx = _random_ids(1, 200, 2, 4, 32, seed=10)
    got = block_major_selected_attention(
        q.bfloat16(), k.bfloat16(), v.bfloat16(), idx, 0, 32, 0.25, 1, 2
    )
    assert got.dtype == torch.bfloat16
    ref = _reference(
        q.bfloat16().float(), k.bfloat16().float(), v.bfloat16().float(), idx, 32, 0.25, 0
    )
    torch.testing.assert_close(got.float(), ref, rtol=2e-2, atol=2e-2)


def test_plain_product_branch_off_the_cpu_kernel() -> None:
    """float64 (as any non-CPU device) takes attention_with_lse's plain-product branch."""
    q, k, v = (x.double() for x in _qkv(150, 4, 2, seed=13))
    idx = _random_ids(1, 150, 2, 4, 32, seed=14)
    got = block_major_selected_attention(q, k, v, idx, 0, 32, 0.3, 1, 2, chunk=8)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, _reference(q, k, v, idx, 32, 0.3, 0), rtol=1e-5, atol=1e-5)


def test_attention_with_lse_matches_plain_math() -> None:
    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(3, 1, 10, 8, generator=g) for _ in range(3))
    mask = torch.zeros(1, 1, 10, 10).masked_fill_(torch.ones(10, 10).triu(1).bool(), -torch.inf)
    out, lse = attention_with_lse(q, k, v, 0.4, mask)
    logits = q @ k.transpose(-1, -2) * 0.4 + mask
    torch.testing.assert_close(lse, torch.logsumexp(logits, -1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, torch.softmax(logits, -1) @ v, rtol=1e-5, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(
    s=st.integers(1, 150),
    frac=st.floats(0.0, 1.0),
    block=st.sampled_from([8, 16, 32]),
    heads=st.sampled_from([(2, 1), (4, 2), (3, 3)]),
    init=st.integers(0, 2),
    local=st.integers(0, 3),
    chunk=st.sampled_from([1, 3, 64]),
    seed=st.integers(0, 2**16),
)
def test_property_equals_reference(s, frac, block, heads, init, local, chunk, seed) -> None:
    hq, hkv = heads
    start = int(frac * (s - 1))
    q, k, v = _qkv(s, hq, hkv, d=8, seed=seed)
    idx = _random_ids(1, s, hkv, 3, block, seed=seed + 1)
    got = block_major_selected_attention(
        q[:, start:], k, v, idx[:, start:], start, block, 0.35, init, local, chunk=chunk
    )
    ref = _reference(q, k, v, idx, block, 0.35, start)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_dssa_routes_per_query_prefill_through_block_major(monkeypatch) -> None:
    """Without and with a gradient: the block-major path (the one PyTorch path)."""
    calls = {"block_major": 0}
    real_bm = block_major_selected_attention

    def bm(*a, **kw):
        calls["block_major"] += 1
        return real_bm(*a, **kw)

    monkeypatch.setattr(dssa_mod, "block_major_selected_attention", bm)
    cfg = DSSAConfig.training_free(dense_len=256, window_size=128, topk=6, backend="torch")
    q, k, v = _qkv(700, 6, 2, seed=12)
    with torch.no_grad():
        fast = dssa_attention(q, k, v, cfg)
    assert calls == {"block_major": 1}
    qg = q.clone().requires_grad_()
    slow = dssa_attention(qg, k, v, cfg)
    assert calls == {"block_major": 2}
    torch.testing.assert_close(fast, slow.detach(), rtol=1e-5, atol=1e-5)
    slow.sum().backward()
    assert qg.grad is not None
    assert qg.grad.isfinite().all()
