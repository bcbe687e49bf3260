"""Decode ops: PyTorch paths against naive dense math, the tie rule and the input checks."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_kernels.decode import (
    block_topk,
    full_decode_attention,
    retrieval_decode_attention,
    sparse_decode_attention,
    topk_reference,
)

torch.set_num_threads(1)


def _naive_attention(q, k, v, scale, keep=None):
    """Loop over batch and heads with explicit softmax in fp64 (``keep`` [B, HQ, S] bool)."""
    b, hq, d = q.shape
    g = hq // k.shape[2]
    out = torch.zeros(b, hq, d, dtype=torch.float64)
    for bi in range(b):
        for h in range(hq):
            kk, vv = k[bi, :, h // g].double(), v[bi, :, h // g].double()
            w = (kk @ q[bi, h].double()) * scale
            if keep is not None:
                w = w[keep[bi, h]]
                vv = vv[keep[bi, h]]
            if w.numel() == 0:
                continue
            p = torch.exp(w - w.max())
            out[bi, h] = (p / p.sum()) @ vv
    return out


def _inputs(seed, b=2, s=37, hkv=2, g=3, d=16, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, hkv * g, d, generator=gen, dtype=dtype)
    k = torch.randn(b, s, hkv, d, generator=gen, dtype=dtype)
    v = torch.randn(b, s, hkv, d, generator=gen, dtype=dtype)
    return q, k, v


@settings(max_examples=25)
@given(
    b=st.integers(1, 2),
    h=st.integers(1, 3),
    s=st.integers(1, 70),
    data=st.data(),
)
def test_block_topk_torch_equals_stable_sort(b, h, s, data):
    k = data.draw(st.integers(1, s))
    bs = data.draw(st.sampled_from([1, 3, 16, 32]))
    seed = data.draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    # few distinct values -> many ties
    scores = torch.randint(0, 5, (b, h, s), generator=gen).float()
    vals, idx = block_topk(scores, k, block_size=bs, backend="torch")
    rv, ri = topk_reference(scores, k)
    assert torch.equal(idx, ri)
    assert torch.equal(vals, rv)
    # same selected multiset of values as torch.topk
    tv, _ = torch.topk(scores, k, dim=-1)
    assert torch.equal(vals, tv)


def test_tie_rule_lower_index_first():
    scores = torch.tensor([[[1.0, 3.0, 3.0, 0.0, 3.0, 2.0, 3.0]]])
    vals, idx = block_topk(scores, 4, block_size=2, backend="torch")
    assert idx.tolist() == [[[1, 2, 4, 6]]]
    vals, idx = block_topk(scores, 5, block_size=4, backend="torch")
    assert idx.tolist() == [[[1, 2, 4, 6, 5]]]
    assert vals.tolist() == [[[3.0, 3.0, 3.0, 3.0, 2.0]]]


def test_valid_len_masks_tail_and_minus_inf_is_a_real_score():
    scores = torch.tensor([[[-math.inf, 1.0, 5.0, 9.0]], [[2.0, -math.inf, 7.0, 8.0]]])
    vl = torch.tensor([3, 2])
    _, idx = block_topk(scores, 2, block_size=2, valid_len=vl, backend="torch")
    assert idx.tolist() == [[[2, 1]], [[0, 1]]]


def test_full_and_retrieval_match_naive_with_gqa_and_valid_len():
    q, k, v = _inputs(0)
    vl = torch.tensor([37, 20])
    scale = 0.3
    keep = (torch.arange(37).view(1, 1, -1) < vl.view(-1, 1, 1)).expand(2, 6, 37)
    want = _naive_attention(q, k, v, scale, keep)
    out, idx = retrieval_decode_attention(q, k, v, 5, scale=scale, valid_len=vl, backend="torch")
    torch.testing.assert_close(out, want, rtol=1e-10, atol=1e-10)
    full = full_decode_attention(q, k, v, scale=scale, valid_len=vl, backend="torch")
    torch.testing.assert_close(full, want, rtol=1e-10, atol=1e-10)
    # indices = top-5 logits per head, each valid
    g = 3
    for bi in range(2):
        for h in range(6):
            logits = k[bi, : int(vl[bi]), h // g] @ q[bi, h]
            assert idx[bi, h].tolist() == torch.topk(logits, 5).indices.tolist()


def test_sparse_matches_naive_per_head_and_shared_with_padding():
    q, k, v = _inputs(1)
    gen = torch.Generator().manual_seed(5)
    per_head = torch.stack([torch.randperm(37, generator=gen)[:9] for _ in range(12)]).view(2, 6, 9)
    per_head[0, 1, 4:] = -1
    per_head[1, 5, :] = -1
    keep = torch.zeros(2, 6, 37, dtype=torch.bool)
    for bi in range(2):
        for h in range(6):
            ids = per_head[bi, h][per_head[bi, h] >= 0]
            keep[bi, h, ids] = True
    got = sparse_decode_attention(q, k, v, per_head, backend="torch")
    torch.testing.assert_close(got, _naive_attention(q, k, v, 0.25, keep), rtol=1e-10, atol=1e-10)
    assert torch.all(got[1, 5] == 0)
    shared = per_head[:, :2]  # [B, HKV=2, K]
    got = sparse_decode_attention(q, k, v, shared, backend="torch")
    want = sparse_decode_attention(q, k, v, shared.repeat_interleave(3, dim=1), backend="torch")
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_sparse_over_all_positions_equals_full():
    q, k, v = _inputs(2)
    allpos = torch.arange(37).flip(0).expand(2, 6, 37)
    got = sparse_decode_attention(q, k, v, allpos, backend="torch")
    torch.testing.assert_close(got, full_decode_attention(q, k, v, backend="torch"))


def test_transposed_hf_cache_is_accepted():
    q, k, v = _inputs(3)
    k_hf, v_hf = k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
    out, idx = retrieval_decode_attention(
        q, k_hf.transpose(1, 2), v_hf.transpose(1, 2), 4, backend="torch"
    )
    ref_out, ref_idx = retrieval_decode_attention(q, k, v, 4, backend="torch")
    torch.testing.assert_close(out, ref_out, rtol=1e-12, atol=1e-12)
    assert torch.equal(idx, ref_idx)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda q, k, v: block_topk(torch.zeros(1, 2, 5), 6), "larger than the context"),
        (
            lambda q, k, v: block_topk(torch.zeros(2, 1, 5), 3, valid_len=torch.tensor([5, 2])),
            r"valid_len\[1\]=2",
        ),
        (lambda q, k, v: block_topk(torch.zeros(2, 5), 1), r"\[batch, heads, seq\]"),
        (lambda q, k, v: block_topk(torch.zeros(1, 1, 5, dtype=torch.long), 1), "dtype"),
        (lambda q, k, v: block_topk(torch.zeros(1, 1, 5), 0), "positive int"),
        (
            lambda q, k, v: block_topk(torch.zeros(1, 1, 5), 1, valid_len=torch.tensor([9])),
            "valid_len",
        ),
        (lambda q, k, v: retrieval_decode_attention(q, k, v, 38), "topk=38"),
        (lambda q, k, v: retrieval_decode_attention(q[:, :5], k, v, 3), "not a multiple"),
        (lambda q, k, v: retrieval_decode_attention(q, k.float(), v, 3), "share a dtype"),
        (lambda q, k, v: retrieval_decode_attention(q, k[0], v[0], 3), "kv_heads, head_dim"),
        (lambda q, k, v: retrieval_decode_attention(q, k[..., :8], v[..., :8], 3), "head_dim"),
        (
            lambda q, k, v: sparse_decode_attention(q, k, v, torch.full((2, 6, 3), 37)),
            r"out of range",
        ),
        (
            lambda q, k, v: sparse_decode_attention(q, k, v, torch.full((2, 6, 3), -2)),
            "out of range",
        ),
        (
            lambda q, k, v: sparse_decode_attention(
                q, k, v, torch.zeros(2, 4, 3, dtype=torch.long)
            ),
            "q_heads=6",
        ),
        (lambda q, k, v: sparse_decode_attention(q, k, v, torch.zeros(2, 6, 3)), "integer"),
        (lambda q, k, v: block_topk(torch.zeros(1, 1, 5), 1, backend="cuda"), "backend"),
    ],
)
def test_clear_errors(call, match):
    q, k, v = _inputs(4)
    with pytest.raises((ValueError, TypeError), match=match):
        call(q, k, v)
