"""Empty inputs (no batch rows, no tokens) give empty outputs and zero/empty gradients on
every backend, instead of crashing inside a kernel or a reduction."""

from __future__ import annotations

import pytest
import torch

import lc_kernels as lck
from lc_kernels.compressed_attention import group_block_scores, num_query_groups

SHAPES = [(0, 20), (1, 0), (0, 0)]  # (batch, tokens)


def _leaves(b, t, hq=4, hkv=2, d=16):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(b, t, hq, d, generator=gen).requires_grad_(True)
    k = torch.randn(b, t, hkv, d, generator=gen).requires_grad_(True)
    v = torch.randn(b, t, hkv, d, generator=gen).requires_grad_(True)
    return q, k, v


def _check_fwd_bwd(out, leaves, shape):
    assert tuple(out.shape) == shape
    out.sum().backward()
    for x in leaves:
        assert x.grad is not None
        assert x.grad.shape == x.shape
        assert (x.grad == 0).all()


@pytest.mark.parametrize(("b", "t"), SHAPES)
@pytest.mark.parametrize(
    ("backend", "order"), [("torch", "auto"), ("triton", "fsa"), ("triton", "nsa")]
)
def test_selected_attention(b, t, backend, order):
    q, k, v = _leaves(b, t)
    idx = torch.zeros(b, t, 2, 2, dtype=torch.int32)
    out = lck.selected_attention(q, k, v, idx, 16, backend=backend, order=order)
    _check_fwd_bwd(out, (q, k, v), (b, t, 4, 16))


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_selected_attention_no_queries_against_a_cache(backend):
    """``Tq = 0`` queries against ``Tk > 0`` keys: dK and dV are zero, of the keys' shape."""
    q, _, _ = _leaves(2, 0)
    _, k, v = _leaves(2, 20)
    out = lck.selected_attention(
        q, k, v, torch.zeros(2, 0, 2, 1, dtype=torch.int64), 16, backend=backend
    )
    _check_fwd_bwd(out, (q, k, v), (2, 0, 4, 16))


@pytest.mark.parametrize(("b", "t"), [*SHAPES, (1, 5)])  # (1, 5): shorter than one span
def test_compressed_attention(b, t):
    q, k, v = _leaves(b, t)
    kc, vc = lck.mean_pool_compress(k, 8, 4), lck.mean_pool_compress(v, 8, 4)
    out = lck.compressed_attention(q, kc, vc, 8, 4)
    _check_fwd_bwd(out, (q, k, v), (b, t, 4, 16))
    assert lck.select_blocks(q, kc, 16, 2, 8, 4).shape == (b, t, 2, 2)


@pytest.mark.parametrize(("b", "t"), SHAPES)
def test_sliding_window_attention(b, t):
    q, k, v = _leaves(b, t)
    _check_fwd_bwd(lck.sliding_window_attention(q, k, v, 8), (q, k, v), (b, t, 4, 16))


def test_sliding_window_attention_packed_without_tokens():
    q, k, v = _leaves(1, 0)
    out = lck.sliding_window_attention(q, k, v, 8, cu_seqlens=torch.tensor([0, 0]))
    _check_fwd_bwd(out, (q, k, v), (1, 0, 4, 16))


@pytest.mark.parametrize(("b", "t"), SHAPES)
@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_paged_chunk_attention(b, t, backend):
    q, k, v = _leaves(b, t)
    _check_fwd_bwd(lck.paged_chunk_attention(q, k, v, backend=backend), (q, k, v), (b, t, 4, 16))


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("with_len", [False, True])
def test_decode_ops_with_an_empty_batch(backend, with_len):
    q = torch.randn(0, 4, 16)
    cache = torch.randn(0, 20, 2, 16)
    vl = torch.zeros(0, dtype=torch.int64) if with_len else None
    out = lck.full_decode_attention(q, cache, cache, valid_len=vl, backend=backend)
    assert out.shape == (0, 4, 16)
    out, idx = lck.retrieval_decode_attention(
        q, cache, cache, 3, block_size=16, valid_len=vl, backend=backend
    )
    assert out.shape == (0, 4, 16)
    assert idx.shape == (0, 4, 3)
    assert idx.dtype == torch.int64
    vals, idx = lck.block_topk(
        torch.randn(0, 4, 20), 3, block_size=16, valid_len=vl, backend=backend
    )
    assert vals.shape == idx.shape == (0, 4, 3)
    sel = torch.zeros(0, 2, 3, dtype=torch.int64)
    assert lck.sparse_decode_attention(q, cache, cache, sel, backend=backend).shape == (0, 4, 16)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_block_topk_without_heads(backend):
    vals, idx = lck.block_topk(torch.randn(2, 0, 20), 3, block_size=16, backend=backend)
    assert vals.shape == idx.shape == (2, 0, 3)


@pytest.mark.parametrize(("b", "t"), SHAPES)
@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("query_block", [1, 16])
def test_group_block_scores(b, t, backend, query_block):
    q, k, _ = _leaves(b, t)
    kc = lck.mean_pool_compress(k.detach(), 8, 4)
    out = group_block_scores(
        q.detach(), kc, kernel_size=8, stride=4, block_size=16, query_block=query_block,
        backend=backend,
    )  # fmt: skip
    ng = num_query_groups(0, t, query_block)
    assert tuple(out.shape) == (b, ng, 2, -(-t // 16))
    assert out.dtype == torch.float32


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("start", [32, 40])
def test_group_block_scores_no_queries_against_a_cache(backend, start):
    """``T = 0`` queries after ``start`` cached keys meet no query group."""
    q, _, _ = _leaves(2, 0)
    _, k, _ = _leaves(2, start)
    kc = lck.mean_pool_compress(k.detach(), 8, 4)
    out = group_block_scores(
        q.detach(), kc, start=start, kv_len=start, kernel_size=8, stride=4, block_size=16,
        query_block=16, backend=backend,
    )  # fmt: skip
    assert tuple(out.shape) == (2, 0, 2, -(-start // 16))
