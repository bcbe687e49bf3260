"""Triton chunk attention over a paged past against the PyTorch reference.

Runs under Triton's interpreter on CPU (``TRITON_INTERPRET=1`` from conftest.py) and
compiled on a GPU. Forward output and log-sum-exp, the chunk's dQ/dK/dV and the dK/dV
added into the gradient pages are compared with the reference, including grouped-query
attention, partial last pages, non-contiguous queries, sparse (permuted, gappy) page
tables and gradient pages that already hold earlier gradients.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lck_helpers import rel_rms

from lc_kernels.paged import (
    PagedKV,
    PageLayout,
    PagePool,
    paged_chunk_attention,
    paged_chunk_attention_backward,
    paged_chunk_attention_forward,
    paged_gather,
    paged_scatter,
)


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-5) -> bool:
    """Relative RMS error below ``tol``, or an absolute one where the reference is ~0
    (e.g. dQ and dK of a one-token chunk without a past are exactly zero)."""
    err = float((a.double() - b.double()).pow(2).mean().sqrt())
    return rel_rms(a, b) < tol or err < 1e-6


def _past(
    gen: torch.Generator,
    b: int,
    hkv: int,
    d: int,
    length: int,
    page: int,
    device: str,
    dtype: torch.dtype = torch.float32,
    shuffle: bool = True,
) -> tuple[PagedKV, PagePool, list[int]]:
    """A past of ``length`` tokens in a pool with four roles (k, v, gk, gv) whose pages
    are scattered over the storage in a random order, with non-zero gradient pages."""
    n = max(1, -(-length // page))
    pools = [PagePool(PageLayout(b, hkv, page, d, dtype), n + 3, device) for _ in range(4)]
    perm = torch.randperm(n + 3, generator=gen)[:n].tolist() if shuffle else list(range(n))
    for pool in pools:
        pool.storage.copy_(torch.randn(pool.storage.shape, generator=gen).to(dtype))
    past = PagedKV(
        pools[0].storage,
        pools[1].storage,
        torch.tensor(perm, dtype=torch.int32, device=device),
        length,
        pools[2].storage,
        pools[3].storage,
        block_tokens=2 * page,
    )
    return past, pools[2], perm


def _clone_grads(past: PagedKV) -> PagedKV:
    assert past.k_grad_pages is not None
    assert past.v_grad_pages is not None
    return PagedKV(
        past.k_pages,
        past.v_pages,
        past.table,
        past.length,
        past.k_grad_pages.clone(),
        past.v_grad_pages.clone(),
        past.block_tokens,
    )


def _compare(
    b: int, t: int, h: int, hkv: int, d: int, length: int, page: int, device: str, seed: int
) -> None:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, t, h, d, generator=gen).to(device)
    k = torch.randn(b, t, hkv, d, generator=gen).to(device)
    v = torch.randn(b, t, hkv, d, generator=gen).to(device)
    do = torch.randn(b, t, h, d, generator=gen).to(device)
    past, _, _ = _past(gen, b, hkv, d, length, page, device)
    ref_past, tri_past = _clone_grads(past), _clone_grads(past)
    out_r, lse_r = paged_chunk_attention_forward(q, k, v, ref_past, backend="torch")
    out_t, lse_t = paged_chunk_attention_forward(q, k, v, tri_past, backend="triton")
    assert rel_rms(out_t, out_r) < 1e-5
    assert rel_rms(lse_t, lse_r) < 1e-6
    got = paged_chunk_attention_backward(q, k, v, out_t, lse_t, do, tri_past, backend="triton")
    want = paged_chunk_attention_backward(q, k, v, out_r, lse_r, do, ref_past, backend="torch")
    for name, g, w in zip(("dq", "dk", "dv"), got, want, strict=True):
        assert _close(g, w), name
    for name in ("k_grad_pages", "v_grad_pages"):
        g, w = getattr(tri_past, name), getattr(ref_past, name)
        assert _close(g, w), name
        untouched = set(range(g.shape[0])) - set(torch.as_tensor(past.table).tolist())
        for p in untouched:  # pages outside the table keep their contents
            assert torch.equal(g[p], getattr(past, name)[p])


@pytest.mark.parametrize(
    ("b", "t", "h", "hkv", "d", "length", "page"),
    [
        (1, 37, 4, 2, 48, 53, 8),  # GQA, partial last page, head_dim not a power of two
        (2, 20, 3, 3, 16, 40, 5),  # MHA, page size not a power of two, whole pages
        (1, 16, 6, 1, 32, 0, 4),  # first chunk: no past at all
        (2, 33, 4, 1, 8, 7, 16),  # past shorter than one page
    ],
)
def test_triton_matches_reference(
    b: int, t: int, h: int, hkv: int, d: int, length: int, page: int, device: str
) -> None:
    _compare(b, t, h, hkv, d, length, page, device, seed=t + length)


@settings(max_examples=6)
@given(
    t=st.integers(1, 40),
    groups=st.sampled_from([1, 2, 3]),
    hkv=st.integers(1, 2),
    d=st.sampled_from([8, 24]),
    length=st.integers(0, 60),
    page=st.integers(1, 9),
    seed=st.integers(0, 1000),
)
def test_triton_matches_reference_property(
    t: int, groups: int, hkv: int, d: int, length: int, page: int, seed: int
) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    _compare(1, t, groups * hkv, hkv, d, length, page, device, seed)


def test_autograd_through_triton_equals_dense_attention(device: str) -> None:
    """End to end: outputs and every gradient against dense causal attention over
    ``[past, chunk]`` with autograd (independent of the reference kernel)."""
    gen = torch.Generator().manual_seed(3)
    b, t, h, hkv, d, length, page = 1, 21, 4, 2, 16, 29, 6
    past, _, perm = _past(gen, b, hkv, d, length, page, device, shuffle=True)
    assert past.k_grad_pages is not None
    assert past.v_grad_pages is not None
    past.k_grad_pages.zero_()
    past.v_grad_pages.zero_()
    q = torch.randn(b, t, h, d, generator=gen).to(device).requires_grad_()
    k = torch.randn(b, t, hkv, d, generator=gen).to(device).requires_grad_()
    v = torch.randn(b, t, hkv, d, generator=gen).to(device).requires_grad_()
    # queries as the attention layers of transformers hand them over: a transposed view
    q_view = q.transpose(1, 2).contiguous().transpose(1, 2)
    out = paged_chunk_attention(q_view, k, v, past, backend="triton")

    kp = paged_gather(past.k_pages, perm, 0, length, backend="torch").clone().requires_grad_()
    vp = paged_gather(past.v_pages, perm, 0, length, backend="torch").clone().requires_grad_()
    keys = torch.cat([kp, k.transpose(1, 2)], 2).repeat_interleave(h // hkv, 1)
    vals = torch.cat([vp, v.transpose(1, 2)], 2).repeat_interleave(h // hkv, 1)
    s = q.transpose(1, 2) @ keys.transpose(-1, -2) / d**0.5
    mask = torch.ones(t, length + t, dtype=torch.bool, device=device).tril(length)
    ref = (s.masked_fill(~mask, float("-inf")).softmax(-1) @ vals).transpose(1, 2)
    assert rel_rms(out, ref) < 1e-5
    grad = torch.randn(out.shape, generator=gen).to(device)
    got = torch.autograd.grad(out, (q, k, v), grad)
    want = torch.autograd.grad(ref, (q, k, v, kp, vp), grad)
    for g, w in zip(got, want[:3], strict=True):
        assert rel_rms(g, w) < 1e-5
    assert (
        rel_rms(paged_gather(past.k_grad_pages, perm, 0, length, backend="torch"), want[3]) < 1e-5
    )
    assert (
        rel_rms(paged_gather(past.v_grad_pages, perm, 0, length, backend="torch"), want[4]) < 1e-5
    )


def test_sparse_page_table_attends_only_to_listed_pages(device: str) -> None:
    """A table listing a subset of pages (page-level sparse attention) equals attention
    over the gathered subset; gradients land in exactly those pages."""
    gen = torch.Generator().manual_seed(7)
    b, t, h, hkv, d, page = 1, 16, 2, 1, 16, 4
    pool_k = PagePool(PageLayout(b, hkv, page, d), 10, device)
    pool_v = PagePool(PageLayout(b, hkv, page, d), 10, device)
    grads = [PagePool(PageLayout(b, hkv, page, d), 10, device) for _ in range(2)]
    for pool in (pool_k, pool_v):
        pool.storage.copy_(torch.randn(pool.storage.shape, generator=gen))
    chosen = [0, 3, 4, 8]
    past = PagedKV(
        pool_k.storage, pool_v.storage, chosen, len(chosen) * page,
        grads[0].storage, grads[1].storage,
    )  # fmt: skip
    q = torch.randn(b, t, h, d, generator=gen).to(device)
    k = torch.randn(b, t, hkv, d, generator=gen).to(device)
    v = torch.randn(b, t, hkv, d, generator=gen).to(device)
    out, lse = paged_chunk_attention_forward(q, k, v, past, backend="triton")
    paged_chunk_attention_backward(q, k, v, out, lse, torch.ones_like(out), past, backend="triton")
    touched = grads[0].storage.flatten(1).abs().sum(1) > 0
    assert touched.nonzero().flatten().tolist() == chosen
    # same numbers as a dense table over a compacted copy of the chosen pages
    compact = PagedKV(
        pool_k.storage[chosen], pool_v.storage[chosen], list(range(4)), 4 * page,
        torch.zeros_like(pool_k.storage[chosen]), torch.zeros_like(pool_k.storage[chosen]),
    )  # fmt: skip
    out_c, lse_c = paged_chunk_attention_forward(q, k, v, compact, backend="torch")
    paged_chunk_attention_backward(
        q, k, v, out_c, lse_c, torch.ones_like(out), compact, backend="torch"
    )
    assert rel_rms(out, out_c) < 1e-5
    assert compact.k_grad_pages is not None
    assert rel_rms(grads[0].storage[chosen], compact.k_grad_pages) < 1e-5


def test_triton_backend_refuses_pages_on_another_device() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device to put the queries and the pages apart")
    pool = PagePool(PageLayout(1, 1, 4, 8), 2, "cpu")
    past = PagedKV(pool.storage, pool.storage, [0, 1], 8)
    q = torch.randn(1, 4, 1, 8, device="cuda")
    with pytest.raises(ValueError, match="needs the pages on"):
        paged_chunk_attention_forward(q, q, q, past, backend="triton")
    out, _ = paged_chunk_attention_forward(q, q, q, past)  # auto streams through the reference
    assert out.shape == q.shape


def test_scatter_is_what_the_kernel_reads(device: str) -> None:
    """Pages written with paged_scatter are read back by the kernel in logical order."""
    gen = torch.Generator().manual_seed(11)
    b, hkv, d, page, length = 1, 1, 16, 3, 10
    pools = [PagePool(PageLayout(b, hkv, page, d), 6, device) for _ in range(2)]
    table = [5, 1, 3, 0]
    keys = torch.randn(b, hkv, length, d, generator=gen).to(device)
    vals = torch.randn(b, hkv, length, d, generator=gen).to(device)
    paged_scatter(pools[0].storage, table, 0, keys)
    paged_scatter(pools[1].storage, table, 0, vals)
    past = PagedKV(pools[0].storage, pools[1].storage, table, length)
    q = torch.zeros(b, 1, 1, d, device=device)  # uniform attention over past + itself
    k = torch.zeros(b, 1, 1, d, device=device)
    v = torch.zeros(b, 1, 1, d, device=device)
    out, _ = paged_chunk_attention_forward(q, k, v, past, backend="triton")
    torch.testing.assert_close(out[0, 0, 0], vals[0, 0].sum(0) / (length + 1))


def test_strided_last_dimension_and_float16(device: str) -> None:
    """Queries whose last dimension is strided are handled; fp16 inputs and pages match
    the fp32 reference to fp16 accuracy."""
    gen = torch.Generator().manual_seed(5)
    b, t, h, hkv, d, length, page = 1, 18, 4, 2, 16, 22, 8
    past, _, _ = _past(gen, b, hkv, d, length, page, device)
    wide = torch.randn(b, t, h, 2 * d, generator=gen).to(device)
    q = wide[..., ::2]  # last-dimension stride 2
    k = torch.randn(b, t, hkv, d, generator=gen).to(device)
    v = torch.randn(b, t, hkv, d, generator=gen).to(device)
    out_s, _ = paged_chunk_attention_forward(q, k, v, past, backend="triton")
    out_c, _ = paged_chunk_attention_forward(q.contiguous(), k, v, past, backend="torch")
    assert rel_rms(out_s, out_c) < 1e-5

    half = PagedKV(past.k_pages.half(), past.v_pages.half(), past.table, length)
    out_h, lse_h = paged_chunk_attention_forward(
        q.contiguous().half(), k.half(), v.half(), half, backend="triton"
    )
    assert out_h.dtype == torch.float16
    assert rel_rms(out_h.float(), out_c) < 5e-3
    do = torch.randn(out_h.shape, generator=gen).to(device)
    dq_h = paged_chunk_attention_backward(
        q.contiguous().half(), k.half(), v.half(), out_h, lse_h, do.half(), half, backend="triton"
    )[0]
    out_r, lse_r = paged_chunk_attention_forward(q.contiguous(), k, v, past, backend="torch")
    dq_r = paged_chunk_attention_backward(
        q.contiguous(), k, v, out_r, lse_r, do, _clone_grads(past), backend="torch"
    )[0]
    assert rel_rms(dq_h.float(), dq_r) < 1e-2
