"""Triton kernels of InfLLM-v2's stage 1: block scores of position-aligned query groups.

The rows of a KV head are its (query, query head) pairs, ``row = t * G + h``. Two kernels:

- ``_lse_kernel``: one program per tile of ``BLOCK_M`` rows walks the compressed keys
  the tile's last query can see, masks the spans a row cannot see yet, and keeps an
  online max and sum: it writes each row's log-sum-exp (base 2; ``-inf`` for a row that
  sees nothing).
- ``_pool_kernel``: one program per (query group, KV head, tile of ``BLOCK_NB``
  selection blocks). For each offset ``o`` of a span in a block's pooling window
  (``-PAD <= o < R``) it loads the spans ``j * R + o`` of its blocks, forms every row's
  probability ``2 ** (z - lse)``, sums over the group's rows and keeps the running
  maximum over ``o``. The ``[rows, C]`` probabilities are never written; a block tile
  past what the group can see stores zeros without touching a key.

Every grid size comes from Python integers: nothing is read back from the device.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from lc_kernels._common import dot_precision
from lc_kernels.compressed_attention.reference import num_query_groups


@triton.jit
def _visible(x, C, ST: tl.constexpr):
    """Spans visible to the query at position ``x + KS - 1`` (``x`` may be negative)."""
    return tl.minimum(C, tl.maximum(0, x + ST) // ST)


@triton.jit
def _load_rows(q, b, kvh, rows, rmask, d, dmask, sq_b, sq_t, sq_h, sq_d, G: tl.constexpr):
    t = rows // G
    h = rows % G
    ptr = q + b * sq_b + t.to(tl.int64) * sq_t + (kvh * G + h) * sq_h
    return tl.load(
        ptr[:, None] + d[None, :] * sq_d, mask=rmask[:, None] & dmask[None, :], other=0.0
    )


# The log-sum-exp and pooling kernels repeat their score tile inline on purpose (a
# shared helper returning the tile would cost registers and speed).
@triton.jit
def _lse_kernel(
    q,
    kc,
    lse,
    sq_b,
    sq_t,
    sq_h,
    sq_d,
    sk_b,
    sk_c,
    sk_h,
    sk_d,
    T,
    C,
    start,
    scale_log2,
    HKV: tl.constexpr,
    G: tl.constexpr,
    KS: tl.constexpr,
    ST: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_C: tl.constexpr,
    PREC: tl.constexpr,
):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // HKV).to(tl.int64)
    kvh = bh % HKV
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < T * G
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    qt = _load_rows(q, b, kvh, rows, rmask, d, dmask, sq_b, sq_t, sq_h, sq_d, G)
    pos = start + rows // G
    last = tl.minimum(T - 1, (pid * BLOCK_M + BLOCK_M - 1) // G)
    c_hi = _visible(start + last - KS + 1, C, ST)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    k_base = kc + b * sk_b + kvh * sk_h
    for c0 in range(0, c_hi, BLOCK_C):
        cs = c0 + tl.arange(0, BLOCK_C)
        cm = cs < c_hi
        kt = tl.load(
            k_base + cs[:, None].to(tl.int64) * sk_c + d[None, :] * sk_d,
            mask=cm[:, None] & dmask[None, :],
            other=0.0,
        )
        z = tl.dot(qt, tl.trans(kt), input_precision=PREC) * scale_log2
        seen = cm[None, :] & ((cs * ST + KS - 1)[None, :] <= pos[:, None])
        z = tl.where(seen, z, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(z, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        l_i = l_i * tl.exp2(m_i - m_use) + tl.sum(tl.exp2(z - m_use[:, None]), 1)
        m_i = m_new
    out = tl.where(l_i > 0, m_i + tl.log2(tl.where(l_i > 0, l_i, 1.0)), float("-inf"))
    tl.store(lse + bh.to(tl.int64) * T * G + rows, out, mask=rmask)


@triton.jit
def _pool_kernel(
    q,
    kc,
    lse,
    out,
    sq_b,
    sq_t,
    sq_h,
    sq_d,
    sk_b,
    sk_c,
    sk_h,
    sk_d,
    so_b,
    so_g,
    so_h,
    so_j,
    T,
    C,
    NB,
    start,
    g0,
    scale_log2,
    HKV: tl.constexpr,
    G: tl.constexpr,
    QB: tl.constexpr,
    KS: tl.constexpr,
    ST: tl.constexpr,
    R: tl.constexpr,
    PAD: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_NB: tl.constexpr,
    PREC: tl.constexpr,
):
    grp = tl.program_id(0)
    bh = tl.program_id(1)
    jt = tl.program_id(2)
    b = (bh // HKV).to(tl.int64)
    kvh = bh % HKV
    p_lo = tl.maximum(start, (g0 + grp) * QB)
    p_hi = tl.minimum(start + T, (g0 + grp + 1) * QB)  # exclusive
    row0 = (p_lo - start) * G
    row_end = (p_hi - start) * G
    c_vis = _visible(p_hi - 1 - KS + 1, C, ST)  # spans the group's last query sees
    js = jt * BLOCK_NB + tl.arange(0, BLOCK_NB)
    jm = js < NB
    n_tiles = tl.cdiv(row_end - row0, BLOCK_M)
    n_tiles = tl.where(jt * BLOCK_NB * R - PAD < c_vis, n_tiles, 0)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    k_base = kc + b * sk_b + kvh * sk_h
    best = tl.zeros([BLOCK_NB], tl.float32)
    for o in tl.static_range(R + PAD):
        cs = js * R + (o - PAD)
        cm = jm & (cs >= 0) & (cs < c_vis)
        kt = tl.load(
            k_base + cs[:, None].to(tl.int64) * sk_c + d[None, :] * sk_d,
            mask=cm[:, None] & dmask[None, :],
            other=0.0,
        )
        s_o = tl.zeros([BLOCK_NB], tl.float32)
        for i in range(n_tiles):
            rows = row0 + i * BLOCK_M + tl.arange(0, BLOCK_M)
            rmask = rows < row_end
            qt = _load_rows(q, b, kvh, rows, rmask, d, dmask, sq_b, sq_t, sq_h, sq_d, G)
            lr = tl.load(lse + bh.to(tl.int64) * T * G + rows, mask=rmask, other=float("-inf"))
            z = tl.dot(qt, tl.trans(kt), input_precision=PREC) * scale_log2
            pos = start + rows // G
            seen = (
                (rmask & (lr > float("-inf")))[:, None]
                & cm[None, :]
                & ((cs * ST + KS - 1)[None, :] <= pos[:, None])
            )
            s_o += tl.sum(tl.where(seen, tl.exp2(z - lr[:, None]), 0.0), 0)
        best = tl.maximum(best, s_o)
    ptr = out + b * so_b + grp.to(tl.int64) * so_g + kvh * so_h + js * so_j
    tl.store(ptr, best, mask=jm)


def group_block_scores_triton(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    start: int,
    kv_len: int,
    kernel_size: int,
    stride: int,
    block_size: int,
    query_block: int,
    scale: float,
) -> torch.Tensor:
    """Triton version of ``group_block_scores_reference``: ``[B, NG, H_kv, NB]`` fp32."""
    b, t, hq, d = q.shape
    c, hkv = k_cmp.shape[1], k_cmp.shape[2]
    g = hq // hkv
    ng = num_query_groups(start, t, query_block)
    nb = -(-kv_len // block_size)
    out = torch.zeros(b, ng, hkv, nb, dtype=torch.float32, device=q.device)
    if b == 0 or c == 0 or t == 0:
        return out
    lse = torch.empty(b * hkv, t * g, dtype=torch.float32, device=q.device)
    scale_log2 = scale * math.log2(math.e)
    prec = dot_precision(q.dtype)
    block_d = max(16, triton.next_power_of_2(d))
    block_m = max(16, min(64, triton.next_power_of_2(t * g)))
    _lse_kernel[(triton.cdiv(t * g, block_m), b * hkv)](
        q, k_cmp, lse, *q.stride(), *k_cmp.stride(), t, c, start, scale_log2,
        HKV=hkv, G=g, KS=kernel_size, ST=stride, D=d, BLOCK_D=block_d,
        BLOCK_M=block_m, BLOCK_C=64, PREC=prec,
    )  # fmt: skip
    block_nb = max(16, min(32, triton.next_power_of_2(nb)))
    _pool_kernel[(ng, b * hkv, triton.cdiv(nb, block_nb))](
        q, k_cmp, lse, out, *q.stride(), *k_cmp.stride(), *out.stride(),
        t, c, nb, start, start // query_block, scale_log2,
        HKV=hkv, G=g, QB=query_block, KS=kernel_size, ST=stride, R=block_size // stride,
        PAD=-(-kernel_size // stride) - 1, D=d, BLOCK_D=block_d,
        BLOCK_M=max(16, min(128, triton.next_power_of_2(query_block * g))),
        BLOCK_NB=block_nb, PREC=prec,
    )  # fmt: skip
    return out
