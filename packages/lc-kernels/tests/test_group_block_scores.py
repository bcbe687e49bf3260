"""InfLLM-v2 group block scores: reference against a loop, Triton against the reference.

Without a GPU the Triton kernels run in Triton's interpreter (``conftest.py``), so the
shapes are small.
"""

from __future__ import annotations

import pytest
import torch

from lc_kernels import mean_pool_compress
from lc_kernels.compressed_attention import (
    group_block_scores,
    group_block_scores_reference,
    num_query_groups,
)

torch.set_num_threads(1)


def _inputs(seed, b, t, s, hkv, g, d, device="cpu", dtype=torch.float32, ks=32, st=16):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, t, hkv * g, d, generator=gen)
    k = torch.randn(b, s, hkv, d, generator=gen)
    kc = mean_pool_compress(k, ks, st)
    return q.to(device=device, dtype=dtype), kc.to(device=device, dtype=dtype)


def _loop_scores(q, kc, start, s, ks, st, bs, qb, scale):
    """One query, one head, one span at a time, in float64."""
    b, t, hq, _ = q.shape
    c, hkv = kc.shape[1], kc.shape[2]
    g = hq // hkv
    ng = num_query_groups(start, t, qb)
    nb = -(-s // bs)
    span = torch.zeros(b, ng, hkv, c, dtype=torch.float64)
    for i in range(t):
        p = start + i
        m = p // qb - start // qb
        vis = [cc for cc in range(c) if cc * st + ks - 1 <= p]
        if not vis:
            continue
        for bb in range(b):
            for h in range(hq):
                z = torch.stack([q[bb, i, h].double() @ kc[bb, cc, h // g].double() for cc in vis])
                span[bb, m, h // g, vis] += torch.softmax(z * scale, 0)
    out = torch.zeros(b, ng, hkv, nb, dtype=torch.float64)
    for j in range(nb):
        over = [cc for cc in range(c) if cc * st < (j + 1) * bs and cc * st + ks > j * bs]
        if over:
            out[..., j] = span[..., over].amax(-1)
    return out


@pytest.mark.parametrize(
    ("t", "start", "s", "qb", "g", "ks", "st", "bs"),
    [
        (40, 0, 40, 1, 2, 32, 16, 64),  # first queries see nothing
        (96, 64, 160, 16, 3, 32, 16, 64),  # groups cut at the end, kv past the queries
        (70, 30, 100, 64, 1, 32, 16, 32),  # first group cut by start
        (1, 199, 200, 1, 4, 24, 8, 32),  # one decode query, kernel not a multiple of stride
    ],
)
def test_reference_matches_loop(t, start, s, qb, g, ks, st, bs):
    q, kc = _inputs(t + s, 2, t, s, 2, g, 8, ks=ks, st=st)
    got = group_block_scores_reference(q, kc, start, s, ks, st, bs, qb, 0.3)
    want = _loop_scores(q, kc, start, s, ks, st, bs, qb, 0.3)
    assert got.shape == want.shape
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("t", "start", "s", "qb", "g", "d"),
    [
        (96, 64, 160, 16, 3, 16),
        (130, 0, 130, 64, 2, 8),
        (50, 77, 300, 64, 1, 16),
        (1, 299, 300, 1, 4, 16),
        (20, 140, 160, 1, 2, 8),
    ],
)
def test_triton_matches_reference(t, start, s, qb, g, d, device):
    q, kc = _inputs(7 * t + s, 2, t, s, 2, g, d, device=device)
    kw = dict(start=start, kv_len=s, query_block=qb, scale=0.25)
    got = group_block_scores(q, kc, backend="triton", **kw)
    want = group_block_scores(q, kc, backend="torch", **kw)
    assert got.shape == (2, num_query_groups(start, t, qb), 2, -(-s // 64))
    torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize(("ks", "st"), [(4, 4), (8, 4), (8, 8)])
def test_triton_fine_spans_match_reference(ks, st, device):
    """Short spans (many per block), as a training-free DSSA scores blocks."""
    q, kc = _inputs(ks * 10 + st, 1, 70, 200, 2, 3, 8, device=device, ks=ks, st=st)
    kw = dict(start=130, kv_len=200, kernel_size=ks, stride=st, block_size=32, scale=0.3)
    for qb in (1, 32):
        got = group_block_scores(q, kc, backend="triton", query_block=qb, **kw)
        want = group_block_scores(q, kc, backend="torch", query_block=qb, **kw)
        torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-6)
    ref = group_block_scores_reference(q.cpu(), kc.cpu(), 130, 200, ks, st, 32, 32, 0.3)
    loop = _loop_scores(q.cpu(), kc.cpu(), 130, 200, ks, st, 32, 32, 0.3)
    torch.testing.assert_close(ref.double(), loop, rtol=1e-5, atol=1e-6)


def _half_precision(dtype, device):
    q, kc = _inputs(3, 1, 64, 192, 2, 2, 16, device=device, dtype=dtype)
    kw = dict(start=128, kv_len=192, query_block=64)
    got = group_block_scores(q, kc, backend="triton", **kw)
    want = group_block_scores(q, kc, backend="torch", **kw)  # fp32 math on the same inputs
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)


def test_triton_fp16_matches_reference(device):
    _half_precision(torch.float16, device)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 dot products need a GPU")
def test_triton_bf16_matches_reference_on_gpu():
    _half_precision(torch.bfloat16, "cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_triton_long_context_on_gpu():
    """32K keys, SmolLM2's heads, groups of 64: the sizes DSSA runs at."""
    q, kc = _inputs(4, 1, 4096, 32768, 3, 3, 64, device="cuda", dtype=torch.bfloat16)
    kw = dict(start=32768 - 4096, kv_len=32768, query_block=64)
    got = group_block_scores(q, kc, backend="triton", **kw)
    want = group_block_scores(q, kc, backend="torch", **kw)
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)


def test_sums_are_probability_mass():
    """Summed over all spans, a group's mass is (visible queries) x (heads)."""
    q, kc = _inputs(5, 1, 64, 64, 1, 3, 8, ks=16, st=16)
    s = group_block_scores(q, kc, query_block=64, block_size=16, stride=16, kernel_size=16)
    seen = sum(1 for p in range(64) if p >= 15)  # block = span: pooling is the identity
    torch.testing.assert_close(s.sum(), torch.tensor(seen * 3.0), rtol=1e-5, atol=1e-5)


def test_bad_input_is_rejected():
    q, kc = _inputs(0, 1, 16, 64, 1, 2, 8)
    with pytest.raises(ValueError, match="compressed keys"):
        group_block_scores(q, kc, kv_len=96, start=0)
    with pytest.raises(ValueError, match="pass kv_len"):
        group_block_scores(q, kc, start=60, kv_len=64)
    with pytest.raises(ValueError, match="multiple of stride"):
        group_block_scores(q, kc, start=48, kv_len=64, block_size=40)
    with pytest.raises(ValueError, match="query_block"):
        group_block_scores(q, kc, start=48, kv_len=64, query_block=0)
    with pytest.raises(ValueError, match="HQ a multiple"):
        group_block_scores(
            q[:, :, :1].expand(1, 16, 3, 8).contiguous(), kc.expand(1, 3, 2, 8), 48, 64
        )
    with pytest.raises(ValueError, match="4-D"):
        group_block_scores(q[0], kc, 48, 64)
