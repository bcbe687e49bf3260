"""Decode ops: Triton kernels against the PyTorch references.

Without a GPU the kernels run in Triton's interpreter on CPU tensors (``conftest.py``
sets ``TRITON_INTERPRET=1``), so shapes are small and odd and example counts low.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lck_helpers import rel_rms

from lc_kernels.decode import (
    block_topk,
    full_decode_attention,
    retrieval_decode_attention,
    sparse_decode_attention,
    topk_reference,
)
from lc_kernels.decode.triton import decode_attention_triton

torch.set_num_threads(1)


def _qkv(seed, b, s, hkv, g, d, device, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, hkv * g, d, generator=gen)
    k = torch.randn(b, s, hkv, d, generator=gen)
    v = torch.randn(b, s, hkv, d, generator=gen)
    return [x.to(device=device, dtype=dtype) for x in (q, k, v)]


@pytest.mark.parametrize(
    ("s", "k", "bs", "use_valid"),
    [(100, 5, 32, False), (100, 40, 16, True), (77, 77, 64, False), (50, 1, 16, True)],
)
def test_block_topk_matches_stable_sort_with_ties(s, k, bs, use_valid, device):
    gen = torch.Generator().manual_seed(s + k)
    scores = torch.randint(0, 4, (2, 2, s), generator=gen).float().to(device)
    vl = torch.tensor([s, max(k, s // 2)], device=device) if use_valid else None
    vals, idx = block_topk(scores, k, block_size=bs, valid_len=vl, backend="triton")
    rv, ri = topk_reference(scores, k, vl)
    assert torch.equal(idx, ri)
    assert torch.equal(vals, rv)
    assert idx.dtype == torch.int64


def test_block_topk_signed_zeros_tie_and_minus_inf_and_strides(device):
    row = [-0.0, 0.0, -1.5, float("-inf"), 2.0, -0.0, float("-inf"), 3.0]
    x = torch.tensor(row * 4, device=device)
    # a transposed view: [batch=1, heads=2, seq=16] with non-unit seq stride
    scores = x.view(16, 1, 2).permute(1, 2, 0)
    vals, idx = block_topk(scores, 16, block_size=16, backend="triton")
    ref_v, ref_i = topk_reference(scores, 16)
    assert torch.equal(idx, ref_i)
    assert torch.equal(vals, ref_v)


@settings(max_examples=8)
@given(s=st.integers(1, 90), h=st.integers(1, 2), data=st.data())
def test_block_topk_property(s, h, data):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    k = data.draw(st.integers(1, s))
    bs = data.draw(st.sampled_from([16, 32]))
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 999)))
    scores = torch.randn(1, h, s, generator=gen).round(decimals=1).to(device)
    _, idx = block_topk(scores, k, block_size=bs, backend="triton")
    assert torch.equal(idx, topk_reference(scores, k)[1])


@pytest.mark.parametrize(("g", "splits", "hf_layout"), [(3, 3, True), (1, 1, False), (4, 2, False)])
def test_retrieval_matches_reference(g, splits, hf_layout, device):
    q, k, v = _qkv(g, 2, 70, 2, g, 48, device)
    if hf_layout:  # a Hugging Face cache [B, HKV, S, D] read through a transposed view
        k, v = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (k, v))
    vl = torch.tensor([70, 33], device=device)
    out, idx = retrieval_decode_attention(q, k, v, 9, block_size=16, valid_len=vl, backend="triton")
    r_out, r_idx = retrieval_decode_attention(q, k, v, 9, valid_len=vl, backend="torch")
    assert rel_rms(out, r_out) < 1e-5
    assert torch.equal(idx, r_idx)
    o2, logits = decode_attention_triton(
        q, k, v, None, 0.125, vl, want_logits=True, num_splits=splits, block_n=16
    )
    assert rel_rms(o2, full_decode_attention(q, k, v, scale=0.125, valid_len=vl)) < 1e-5
    assert bool(torch.isinf(logits[1, :, 33:]).all())


@pytest.mark.parametrize("shared", [False, True])
def test_sparse_matches_reference_with_padding_and_repeats(shared, device):
    q, k, v = _qkv(7, 2, 61, 2, 3, 48, device)
    gen = torch.Generator().manual_seed(1)
    rows = 2 if shared else 6
    idx = torch.randint(-1, 61, (2, rows, 21), generator=gen)
    idx[0, 0, :5] = 17  # repeated position
    idx[1, 1] = -1  # nothing selected -> zeros
    idx = idx.to(device)
    got = sparse_decode_attention(q, k, v, idx, backend="triton")
    want = sparse_decode_attention(q, k, v, idx, backend="torch")
    assert rel_rms(got, want) < 1e-5
    zero_heads = slice(3, 6) if shared else slice(1, 2)
    assert bool((got[1, zero_heads] == 0).all())


def test_sparse_over_all_positions_equals_full_attention(device):
    q, k, v = _qkv(3, 1, 45, 2, 2, 32, device)
    allpos = torch.randperm(45, generator=torch.Generator().manual_seed(0)).to(device)
    got = sparse_decode_attention(q, k, v, allpos.expand(1, 4, 45), backend="triton")
    full = full_decode_attention(q, k, v, backend="triton")
    assert rel_rms(got, full) < 1e-5
    assert rel_rms(full, full_decode_attention(q, k, v, backend="torch")) < 1e-5


def test_float16_within_tolerance(device):
    q, k, v = _qkv(5, 1, 50, 1, 2, 32, device, torch.float16)
    out, idx = retrieval_decode_attention(q, k, v, 4, block_size=16, backend="triton")
    r_out = full_decode_attention(q.double(), k.double(), v.double(), backend="torch")
    assert out.dtype == torch.float16
    assert rel_rms(out, r_out) < 5e-3
    sp = sparse_decode_attention(q, k, v, idx, backend="triton")
    assert rel_rms(sp, sparse_decode_attention(q.double(), k.double(), v.double(), idx)) < 5e-3


@settings(max_examples=8)
@given(
    s=st.integers(1, 80),
    hkv=st.integers(1, 2),
    g=st.sampled_from([1, 2, 5]),
    d=st.sampled_from([16, 24]),
    seed=st.integers(0, 999),
)
def test_decode_attention_property(s, hkv, g, d, seed):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    q, k, v = _qkv(seed, 1, s, hkv, g, d, device)
    topk = max(1, s // 3)
    out, idx = retrieval_decode_attention(q, k, v, topk, block_size=16, backend="triton")
    r_out, r_idx = retrieval_decode_attention(q, k, v, topk, backend="torch")
    assert rel_rms(out, r_out) < 1e-5
    assert torch.equal(idx, r_idx)
    sp = sparse_decode_attention(q, k, v, idx, backend="triton")
    assert rel_rms(sp, sparse_decode_attention(q, k, v, idx, backend="torch")) < 1e-5


def test_triton_block_size_must_be_power_of_two(device):
    with pytest.raises(ValueError, match="power of two"):
        block_topk(torch.zeros(1, 1, 50, device=device), 3, block_size=24, backend="triton")
    # auto falls back to the PyTorch path for such sizes
    assert block_topk(torch.arange(50.0).view(1, 1, 50), 2, block_size=24)[1].tolist() == [
        [[49, 48]]
    ]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="compiled kernels and bf16 need a GPU")
@pytest.mark.parametrize(("k", "bs"), [(64, 128), (1000, 128), (2048, 4096)])
def test_block_topk_long_rows_on_gpu(k, bs):
    gen = torch.Generator().manual_seed(k)
    scores = torch.randn(2, 4, 40_000, generator=gen).round(decimals=2).cuda()
    vl = torch.tensor([40_000, 23_456], device="cuda")
    vals, idx = block_topk(scores, k, block_size=bs, valid_len=vl, backend="triton")
    rv, ri = topk_reference(scores, k, vl)
    assert torch.equal(idx, ri)
    assert torch.equal(vals, rv)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="compiled kernels and bf16 need a GPU")
def test_bfloat16_decode_on_gpu():
    q, k, v = _qkv(11, 2, 9000, 8, 4, 128, "cuda", torch.bfloat16)
    k, v = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (k, v))
    vl = torch.tensor([9000, 5000], device="cuda")
    out, idx = retrieval_decode_attention(q, k, v, 512, valid_len=vl, backend="triton")
    r_out = full_decode_attention(q.float(), k.float(), v.float(), valid_len=vl, backend="torch")
    assert rel_rms(out, r_out) < 2e-2
    _, r_idx = retrieval_decode_attention(
        q.float(), k.float(), v.float(), 512, valid_len=vl, backend="torch"
    )
    overlap = torch.isin(idx[0, 0], r_idx[0, 0]).float().mean()
    assert overlap > 0.95
    sp = sparse_decode_attention(q, k, v, idx, backend="triton")
    assert rel_rms(sp, sparse_decode_attention(q.float(), k.float(), v.float(), idx)) < 2e-2
