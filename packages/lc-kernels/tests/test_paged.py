"""Paged KV memory: pool bookkeeping, gather/scatter, chunk attention over a paged past."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_kernels.paged import (
    PagedKV,
    PageLayout,
    PagePool,
    paged_chunk_attention,
    paged_gather,
    paged_scatter,
)


def test_pool_allocates_frees_and_reuses_pages() -> None:
    pool = PagePool(PageLayout(1, 2, 4, 8), num_pages=5)
    a = pool.allocate(3)
    b = pool.allocate(2)
    assert sorted(a + b) == list(range(5))
    assert pool.num_free == 0
    with pytest.raises(MemoryError, match="exhausted"):
        pool.allocate(1)
    pool.free(a)
    assert pool.num_free == 3
    assert sorted(pool.allocate(3)) == sorted(a)  # no fragmentation: freed pages are reused
    with pytest.raises(ValueError, match="not allocated"):
        pool.free([99])


def test_layout_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="page_size"):
        PageLayout(1, 2, 0, 8)


@pytest.mark.parametrize("backend", ["torch", "triton"])
@settings(max_examples=15)
@given(
    page_size=st.integers(1, 7),
    length=st.integers(1, 40),
    data=st.data(),
)
def test_scatter_then_gather_round_trips(
    backend: str, page_size: int, length: int, data: st.DataObject
) -> None:
    pages = -(-length // page_size)
    pool = PagePool(PageLayout(2, 3, page_size, 4), num_pages=pages + 3)
    pool.allocate(2)  # the sequence's pages are not the first ones
    table = pool.allocate(pages)
    values = torch.randn(2, 3, length, 4)
    paged_scatter(pool.storage, table, 0, values, backend=backend)
    start = data.draw(st.integers(0, length))
    end = data.draw(st.integers(start, length))
    got = paged_gather(pool.storage, table, start, end, backend=backend)
    assert torch.equal(got, values[:, :, start:end])
    paged_scatter(
        pool.storage, table, start, values[:, :, start:end], accumulate=True, backend=backend
    )
    doubled = values.clone()
    doubled[:, :, start:end] *= 2
    assert torch.allclose(paged_gather(pool.storage, table, 0, length, backend=backend), doubled)


def test_gather_and_scatter_reject_bad_tables_and_values() -> None:
    pool = PagePool(PageLayout(1, 1, 4, 2), num_pages=4)
    table = pool.allocate(2)
    with pytest.raises(ValueError, match="need 3 pages"):
        paged_gather(pool.storage, table, 0, 9)
    with pytest.raises(IndexError, match="outside"):
        paged_gather(pool.storage, [0, 7], 0, 8)
    with pytest.raises(ValueError, match="values must be"):
        paged_scatter(pool.storage, table, 0, torch.zeros(1, 2, 3, 2))
    with pytest.raises(ValueError, match="start <= end"):
        paged_gather(pool.storage, table, 5, 2)


def test_triton_gather_matches_reference_on_a_strided_pool() -> None:
    pool = PagePool(PageLayout(2, 3, 5, 48), num_pages=9)
    pool.storage.copy_(torch.randn_like(pool.storage))
    table = [7, 2, 5, 0]
    for start, end in [(0, 20), (3, 17), (6, 6)]:
        ref = paged_gather(pool.storage, table, start, end, backend="torch")
        assert torch.equal(paged_gather(pool.storage, table, start, end, backend="triton"), ref)


def _paged(values: torch.Tensor, page_size: int) -> tuple[PagePool, list[int]]:
    b, h, t, d = values.shape
    pool = PagePool(PageLayout(b, h, page_size, d, values.dtype), num_pages=-(-t // page_size) + 1)
    pool.allocate(1)
    table = pool.allocate(-(-t // page_size)) if t else []
    if t:
        paged_scatter(pool.storage, table, 0, values)
    return pool, table


@pytest.mark.parametrize(
    ("past_len", "chunk", "heads", "kv_heads", "page", "block"),
    [(0, 7, 4, 2, 4, 8), (23, 7, 6, 2, 5, 10), (17, 9, 3, 3, 4, 4), (40, 5, 8, 1, 8, 16)],
)
def test_chunk_attention_matches_dense_causal_attention(
    past_len: int, chunk: int, heads: int, kv_heads: int, page: int, block: int
) -> None:
    torch.manual_seed(0)
    b, d = 2, 8
    kp, vp = torch.randn(b, kv_heads, past_len, d), torch.randn(b, kv_heads, past_len, d)
    pk, table = _paged(kp, page)
    pv, _ = _paged(vp, page)
    gk, _ = _paged(torch.zeros_like(kp), page)
    gv, _ = _paged(torch.zeros_like(vp), page)
    past = PagedKV(
        pk.storage, pv.storage, table, past_len, gk.storage, gv.storage, block_tokens=block
    )
    q = torch.randn(b, chunk, heads, d, requires_grad=True)
    k = torch.randn(b, chunk, kv_heads, d, requires_grad=True)
    v = torch.randn(b, chunk, kv_heads, d, requires_grad=True)
    out = paged_chunk_attention(q, k, v, past)

    kp_leaf, vp_leaf = kp.clone().requires_grad_(), vp.clone().requires_grad_()
    keys = torch.cat([kp_leaf, k.transpose(1, 2)], 2)
    vals = torch.cat([vp_leaf, v.transpose(1, 2)], 2)
    mask = torch.ones(chunk, past_len + chunk, dtype=torch.bool).tril(past_len)
    ref = F.scaled_dot_product_attention(
        q.transpose(1, 2), keys, vals, attn_mask=mask, enable_gqa=True
    ).transpose(1, 2)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)

    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), grad)
    want = torch.autograd.grad(ref, (q, k, v, kp_leaf, vp_leaf), grad)
    for g, w in zip(got, want[:3]):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(
        paged_gather(gk.storage, table, 0, past_len), want[3], rtol=1e-4, atol=1e-5
    )
    torch.testing.assert_close(
        paged_gather(gv.storage, table, 0, past_len), want[4], rtol=1e-4, atol=1e-5
    )


def test_chunk_attention_passes_gradcheck_in_float64() -> None:
    torch.manual_seed(1)
    kp = torch.randn(1, 1, 5, 3, dtype=torch.float64)
    pk, table = _paged(kp, 2)
    pv, _ = _paged(torch.randn_like(kp), 2)
    past = PagedKV(pk.storage, pv.storage, table, 5, block_tokens=2)
    q = torch.randn(1, 3, 2, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 3, 1, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 3, 1, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, k, v: paged_chunk_attention(q, k, v, past), (q, k, v))


def test_chunk_attention_rejects_mismatched_heads_and_layouts() -> None:
    q = torch.randn(1, 4, 3, 8)
    kv = torch.randn(1, 4, 2, 8)
    with pytest.raises(ValueError, match="multiple of kv heads"):
        paged_chunk_attention(q, kv, kv)
    pool, table = _paged(torch.randn(1, 1, 6, 8), 4)
    past = PagedKV(pool.storage, pool.storage, table, 6)
    with pytest.raises(ValueError, match="past pages hold"):
        paged_chunk_attention(torch.randn(1, 4, 4, 8), kv, kv, past)
