"""Triton kernels for paged gather and scatter (one program per token and head)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lc_kernels._common import dot_precision


@triton.jit
def _gather_kernel(
    storage,
    table,
    out,
    start,
    s_page,
    s_batch,
    s_head,
    s_slot,
    o_batch,
    o_head,
    o_tok,
    HEADS: tl.constexpr,
    PAGE: tl.constexpr,
    DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    tok = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // HEADS
    h = bh % HEADS
    pos = start + tok
    page = tl.load(table + pos // PAGE).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    mask = d < DIM
    src = storage + page * s_page + b * s_batch + h * s_head + (pos % PAGE) * s_slot + d
    x = tl.load(src, mask=mask)
    tl.store(out + b * o_batch + h * o_head + tok * o_tok + d, x, mask=mask)


@triton.jit
def _scatter_kernel(
    storage,
    table,
    values,
    start,
    s_page,
    s_batch,
    s_head,
    s_slot,
    v_batch,
    v_head,
    v_tok,
    HEADS: tl.constexpr,
    PAGE: tl.constexpr,
    DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    ACCUMULATE: tl.constexpr,
):
    tok = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // HEADS
    h = bh % HEADS
    pos = start + tok
    page = tl.load(table + pos // PAGE).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    mask = d < DIM
    dst = storage + page * s_page + b * s_batch + h * s_head + (pos % PAGE) * s_slot + d
    x = tl.load(values + b * v_batch + h * v_head + tok * v_tok + d, mask=mask)
    if ACCUMULATE:
        x = x + tl.load(dst, mask=mask)
    tl.store(dst, x.to(dst.dtype.element_ty), mask=mask)


def gather_triton(storage: torch.Tensor, table: torch.Tensor, start: int, end: int) -> torch.Tensor:
    """Triton version of :func:`lc_kernels.paged.reference.gather_reference`."""
    _, b, h, page, d = storage.shape
    out = torch.empty(b, h, end - start, d, dtype=storage.dtype, device=storage.device)
    if end > start:
        _gather_kernel[(end - start, b * h)](
            storage, table, out, start, *storage.stride()[:4], *out.stride()[:3],
            HEADS=h, PAGE=page, DIM=d, BLOCK_D=triton.next_power_of_2(d),
        )  # fmt: skip
    return out


def scatter_triton(
    storage: torch.Tensor, table: torch.Tensor, start: int, values: torch.Tensor, accumulate: bool
) -> None:
    """Triton version of :func:`lc_kernels.paged.reference.scatter_reference`."""
    _, b, h, page, d = storage.shape
    values = values.contiguous()
    if values.shape[2]:
        _scatter_kernel[(values.shape[2], b * h)](
            storage, table, values, start, *storage.stride()[:4], *values.stride()[:3],
            HEADS=h, PAGE=page, DIM=d, BLOCK_D=triton.next_power_of_2(d), ACCUMULATE=accumulate,
        )  # fmt: skip


# ------------------------------------------------------------ chunk attention over pages
#
# Layouts: q [B, T, H, D]; the chunk's k, v [B, T, H_kv, D]; past pages
# [num_pages, B, H_kv, P, D] addressed through a page table (physical page of logical
# page i); lse and delta [B, H, T] fp32. Past token n of the sequence lives in page
# table[n // P] at slot n % P, so a block of past tokens is a gather of rows.


@triton.jit
def _past_rows(table, pos, valid, s_page, s_slot, PAGE: tl.constexpr):
    """Row offsets of past tokens ``pos`` inside the page storage (masked rows -> 0)."""
    page = tl.load(table + pos // PAGE, mask=valid, other=0).to(tl.int64)
    return page * s_page + (pos % PAGE).to(tl.int64) * s_slot


# The chunk-attention forward, dQ and dK/dV kernels repeat their tile loads inline on
# purpose (factoring them into helpers costs registers and speed).
@triton.jit
def _chunk_attn_fwd_kernel(
    Q, K, V, KP, VP, TABLE, Out, LSE,
    scale, T, L,
    sq_b, sq_t, sq_h,
    sk_b, sk_t, sk_h,
    so_b, so_t, so_h,
    sp_page, sp_b, sp_h, sp_slot,
    H: tl.constexpr,
    G: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PREC: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = bh % H
    hk = h // G
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mmask = offs_m < T
    dmask = offs_d < D
    q = tl.load(
        Q + b * sq_b + offs_m[:, None].to(tl.int64) * sq_t + h * sq_h + offs_d[None, :],
        mask=mmask[:, None] & dmask[None, :],
        other=0.0,
    )
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    pbase = b * sp_b + hk * sp_h
    for n0 in range(0, L, BLOCK_N):  # the paged past: every query sees every past token
        pos = n0 + offs_n
        nmask = pos < L
        rows = _past_rows(TABLE, pos, nmask, sp_page, sp_slot, PAGE)
        off = pbase + rows[:, None] + offs_d[None, :]
        kvm = nmask[:, None] & dmask[None, :]
        k = tl.load(KP + off, mask=kvm, other=0.0)
        v = tl.load(VP + off, mask=kvm, other=0.0)
        s = tl.dot(q, tl.trans(k.to(q.dtype)), input_precision=PREC) * scale
        s = tl.where(nmask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(q.dtype), v.to(q.dtype), input_precision=PREC)
        m_i = m_new
    hi = tl.minimum((pid_m + 1) * BLOCK_M, T)
    for n0 in range(0, hi, BLOCK_N):  # the chunk itself, causally
        pos = n0 + offs_n
        nmask = pos < T
        off = b * sk_b + pos[:, None].to(tl.int64) * sk_t + hk * sk_h + offs_d[None, :]
        kvm = nmask[:, None] & dmask[None, :]
        k = tl.load(K + off, mask=kvm, other=0.0)
        v = tl.load(V + off, mask=kvm, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PREC) * scale
        s = tl.where(nmask[None, :] & (pos[None, :] <= offs_m[:, None]), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PREC)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(
        Out + b * so_b + offs_m[:, None].to(tl.int64) * so_t + h * so_h + offs_d[None, :],
        out.to(Out.dtype.element_ty),
        mask=mmask[:, None] & dmask[None, :],
    )
    tl.store(LSE + bh.to(tl.int64) * T + offs_m, m_i + tl.log(l_i), mask=mmask)


@triton.jit
def _chunk_attn_dq_kernel(
    Q, K, V, KP, VP, TABLE, DO, LSE, DELTA, DQ,
    scale, T, L,
    sq_b, sq_t, sq_h,
    sk_b, sk_t, sk_h,
    sd_b, sd_t, sd_h,
    sp_page, sp_b, sp_h, sp_slot,
    H: tl.constexpr,
    G: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PREC: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = bh % H
    hk = h // G
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mmask = offs_m < T
    dmask = offs_d < D
    qm = mmask[:, None] & dmask[None, :]
    q = tl.load(
        Q + b * sq_b + offs_m[:, None].to(tl.int64) * sq_t + h * sq_h + offs_d[None, :],
        mask=qm,
        other=0.0,
    )
    do = tl.load(
        DO + b * sd_b + offs_m[:, None].to(tl.int64) * sd_t + h * sd_h + offs_d[None, :],
        mask=qm,
        other=0.0,
    )
    lse = tl.load(LSE + bh.to(tl.int64) * T + offs_m, mask=mmask, other=0.0)
    delta = tl.load(DELTA + bh.to(tl.int64) * T + offs_m, mask=mmask, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    pbase = b * sp_b + hk * sp_h
    for n0 in range(0, L, BLOCK_N):
        pos = n0 + offs_n
        nmask = pos < L
        rows = _past_rows(TABLE, pos, nmask, sp_page, sp_slot, PAGE)
        off = pbase + rows[:, None] + offs_d[None, :]
        kvm = nmask[:, None] & dmask[None, :]
        k = tl.load(KP + off, mask=kvm, other=0.0).to(q.dtype)
        v = tl.load(VP + off, mask=kvm, other=0.0).to(q.dtype)
        s = tl.dot(q, tl.trans(k), input_precision=PREC) * scale
        p = tl.where(nmask[None, :], tl.exp(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PREC)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(q.dtype), k, input_precision=PREC)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, T)
    for n0 in range(0, hi, BLOCK_N):
        pos = n0 + offs_n
        nmask = pos < T
        off = b * sk_b + pos[:, None].to(tl.int64) * sk_t + hk * sk_h + offs_d[None, :]
        kvm = nmask[:, None] & dmask[None, :]
        k = tl.load(K + off, mask=kvm, other=0.0)
        v = tl.load(V + off, mask=kvm, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PREC) * scale
        allowed = nmask[None, :] & (pos[None, :] <= offs_m[:, None])
        p = tl.where(allowed, tl.exp(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PREC)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PREC)
    tl.store(
        DQ + b * sq_b + offs_m[:, None].to(tl.int64) * sq_t + h * sq_h + offs_d[None, :],
        (dq * scale).to(DQ.dtype.element_ty),
        mask=qm,
    )


@triton.jit
def _chunk_attn_dkv_kernel(
    Q, K, V, TABLE, DO, LSE, DELTA, DK, DV,
    scale, T, LEN,
    sq_b, sq_t, sq_h,
    sk_b, sk_t, sk_h, sk_page,
    sd_b, sd_t, sd_h,
    sg_b, sg_t, sg_h, sg_page,
    H: tl.constexpr,
    G: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PAST: tl.constexpr,
    PREC: tl.constexpr,
):  # fmt: skip
    """dK/dV of one block of keys, summed over the G query heads of its KV head.

    ``PAST``: the keys are past tokens ``[0, LEN)`` in pages (``K``/``V`` are the page
    storages, ``sk_t`` their slot stride) and the gradients are *added* into the
    gradient pages ``DK``/``DV``. Otherwise they are the chunk's keys (``LEN == T``),
    attended causally, and the gradients are written to ``DK``/``DV`` ``[B, T, H_kv, D]``.
    """
    pid_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // (H // G)).to(tl.int64)
    hk = bh % (H // G)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    nmask = offs_n < LEN
    dmask = offs_d < D
    kvm = nmask[:, None] & dmask[None, :]
    if PAST:
        rows = _past_rows(TABLE, offs_n, nmask, sk_page, sk_t, PAGE)
        g_rows = _past_rows(TABLE, offs_n, nmask, sg_page, sg_t, PAGE)
        k_off = b * sk_b + hk * sk_h + rows[:, None] + offs_d[None, :]
        g_off = b * sg_b + hk * sg_h + g_rows[:, None] + offs_d[None, :]
    else:
        k_off = b * sk_b + offs_n[:, None].to(tl.int64) * sk_t + hk * sk_h + offs_d[None, :]
        g_off = b * sg_b + offs_n[:, None].to(tl.int64) * sg_t + hk * sg_h + offs_d[None, :]
    k = tl.load(K + k_off, mask=kvm, other=0.0)
    v = tl.load(V + k_off, mask=kvm, other=0.0)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    if PAST:
        lo = 0
    else:
        lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M
    for g in range(G):
        h = hk * G + g
        bhq = (b * H + h) * T
        for m0 in range(lo, T, BLOCK_M):
            pos_m = m0 + offs_m
            mmask = pos_m < T
            qm = mmask[:, None] & dmask[None, :]
            q_off = b * sq_b + pos_m[:, None].to(tl.int64) * sq_t + h * sq_h + offs_d[None, :]
            q = tl.load(Q + q_off, mask=qm, other=0.0)
            d_off = b * sd_b + pos_m[:, None].to(tl.int64) * sd_t + h * sd_h + offs_d[None, :]
            do = tl.load(DO + d_off, mask=qm, other=0.0)
            lse = tl.load(LSE + bhq + pos_m, mask=mmask, other=0.0)
            delta = tl.load(DELTA + bhq + pos_m, mask=mmask, other=0.0)
            st = tl.dot(k.to(q.dtype), tl.trans(q), input_precision=PREC) * scale  # [N, M]
            allowed = nmask[:, None] & mmask[None, :]
            if not PAST:
                allowed = allowed & (offs_n[:, None] <= pos_m[None, :])
            pt = tl.where(allowed, tl.exp(st - lse[None, :]), 0.0)
            dv += tl.dot(pt.to(do.dtype), do, input_precision=PREC)
            dpt = tl.dot(v.to(do.dtype), tl.trans(do), input_precision=PREC)
            dst = pt * (dpt - delta[None, :])
            dk += tl.dot(dst.to(q.dtype), q, input_precision=PREC)
    dk = dk * scale
    if PAST:
        dk += tl.load(DK + g_off, mask=kvm, other=0.0).to(tl.float32)
        dv += tl.load(DV + g_off, mask=kvm, other=0.0).to(tl.float32)
    tl.store(DK + g_off, dk.to(DK.dtype.element_ty), mask=kvm)
    tl.store(DV + g_off, dv.to(DV.dtype.element_ty), mask=kvm)


def _unit_last(x: torch.Tensor) -> torch.Tensor:
    """The kernels index the last dimension with stride 1 (other strides are passed)."""
    return x if x.stride(-1) == 1 else x.contiguous()


def _tiles() -> tuple[int, int, int]:
    """``(BLOCK_M, BLOCK_N, num_warps)``: small tiles under the interpreter."""
    from lc_kernels._common import interpreter_on

    return (16, 16, 1) if interpreter_on() else (64, 64, 4)


def chunk_attention_forward_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_pages: torch.Tensor,
    v_pages: torch.Tensor,
    table: torch.Tensor,
    length: int,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward launcher: ``(out [B, T, H, D], lse [B, H, T] fp32)``."""
    q, k, v = _unit_last(q), _unit_last(k), _unit_last(v)
    k_pages, v_pages = k_pages.contiguous(), v_pages.contiguous()  # no-ops for pools
    b, t, h, d = q.shape
    hkv = k.shape[2]
    out = torch.empty_like(q)
    lse = torch.empty(b, h, t, dtype=torch.float32, device=q.device)
    block_m, block_n, warps = _tiles()
    _chunk_attn_fwd_kernel[(triton.cdiv(t, block_m), b * h)](
        q, k, v, k_pages, v_pages, table, out, lse,
        scale, t, length,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        *k_pages.stride()[:4],
        H=h, G=h // hkv, D=d, BLOCK_D=max(16, triton.next_power_of_2(d)),
        PAGE=k_pages.shape[3], BLOCK_M=block_m, BLOCK_N=block_n, PREC=dot_precision(q.dtype),
        num_warps=warps,
    )  # fmt: skip
    return out, lse


def chunk_attention_backward_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor,
    k_pages: torch.Tensor,
    v_pages: torch.Tensor,
    table: torch.Tensor,
    length: int,
    k_grad_pages: torch.Tensor | None,
    v_grad_pages: torch.Tensor | None,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Backward launcher: ``(dq, dk, dv)`` of the chunk; adds the past's dK/dV into the
    gradient pages when they are given."""
    q, k, v, out = _unit_last(q), _unit_last(k), _unit_last(v), _unit_last(out)
    k_pages, v_pages = k_pages.contiguous(), v_pages.contiguous()
    grad_pages = [g for g in (k_grad_pages, v_grad_pages) if g is not None]
    if not all(g.is_contiguous() for g in grad_pages):
        raise ValueError("gradient pages must be contiguous (they are written in place)")
    b, t, h, d = q.shape
    hkv = k.shape[2]
    g = h // hkv
    grad_out = grad_out.contiguous()
    delta = (grad_out.float() * out.float()).sum(-1).permute(0, 2, 1).contiguous()  # [B, H, T]
    dq = torch.empty_like(q)
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)
    block_m, block_n, warps = _tiles()
    block_d = max(16, triton.next_power_of_2(d))
    prec = dot_precision(q.dtype)
    page = k_pages.shape[3]
    _chunk_attn_dq_kernel[(triton.cdiv(t, block_m), b * h)](
        q, k, v, k_pages, v_pages, table, grad_out, lse, delta, dq,
        scale, t, length,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        grad_out.stride(0), grad_out.stride(1), grad_out.stride(2),
        *k_pages.stride()[:4],
        H=h, G=g, D=d, BLOCK_D=block_d, PAGE=page,
        BLOCK_M=block_m, BLOCK_N=block_n, PREC=prec, num_warps=warps,
    )  # fmt: skip
    common = dict(H=h, G=g, D=d, BLOCK_D=block_d, PAGE=page, BLOCK_M=block_m, BLOCK_N=block_n)
    _chunk_attn_dkv_kernel[(triton.cdiv(t, block_n), b * hkv)](
        q, k, v, table, grad_out, lse, delta, dk, dv,
        scale, t, t,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2), 0,
        grad_out.stride(0), grad_out.stride(1), grad_out.stride(2),
        dk.stride(0), dk.stride(1), dk.stride(2), 0,
        **common, PAST=False, PREC=prec, num_warps=warps,
    )  # fmt: skip
    if length > 0 and k_grad_pages is not None and v_grad_pages is not None:
        kp, gp = k_pages.stride(), k_grad_pages.stride()
        _chunk_attn_dkv_kernel[(triton.cdiv(length, block_n), b * hkv)](
            q, k_pages, v_pages, table, grad_out, lse, delta, k_grad_pages, v_grad_pages,
            scale, t, length,
            q.stride(0), q.stride(1), q.stride(2),
            kp[1], kp[3], kp[2], kp[0],
            grad_out.stride(0), grad_out.stride(1), grad_out.stride(2),
            gp[1], gp[3], gp[2], gp[0],
            **common, PAST=True, PREC=prec, num_warps=warps,
        )  # fmt: skip
    return dq, dk, dv
