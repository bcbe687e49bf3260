"""Triton kernels of selected attention in two loop orders, and their launchers.

All launchers take packed tensors: ``q [N, HQ, D]``, ``k, v [N_k, H_kv, D]`` where ``N``
is the total number of queries of all sequences and ``N_k`` that of keys (``N_k >= N``
when the queries are the last ones of each sequence), and ``idx [N, H_kv, S]`` int32
block ids counted from each sequence's start, deduplicated, ``-1`` = unused. Per query,
``kbos`` is the key row where its sequence starts and ``qpos`` its position among the
sequence's keys (the causal limit); an optional int8 ``kvm [N_k]`` marks padded keys (0).

NSA order forward (``nsa_forward``): one program per (query, KV head). The G query heads
of the group are the M dimension of ``tl.dot`` (padded to at least 16); the program
walks the query's selected blocks with an online softmax.

FSA order forward (``fsa_forward``): one program per (KV block, KV head). It loads the
block once and walks the (query, slot) pairs that selected it, listed by a block ->
query index built on the device; rows of the M dimension are (query, query head) pairs,
so nothing is padded. It writes one normalised partial output and its log-sum-exp per
(query, slot, head); a reduce kernel merges them.

Backward (``selected_backward``, both orders, no atomics): dQ per (query, KV head) in the
NSA order; dK/dV per (KV block, KV head) from the block -> query index, a program owning
its block's gradient (blocks listed by very many queries are cut into chunks whose fp32
partials are summed by a reduce kernel, within a scratch budget of one ``q``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lc_kernels._common import dot_precision, interpreter_on


def _pow2(x: int, lo: int = 16) -> int:
    return max(lo, triton.next_power_of_2(x))


def _tuned(key: list[str], warps: tuple[int, ...]):
    """``triton.autotune`` over ``num_warps`` on a GPU (once per ``key`` value); one config
    (one warp) under the interpreter, where timing means nothing. The tuned kernels only
    store (never accumulate), so the trial launches leave no trace."""
    if interpreter_on():
        return triton.autotune(configs=[triton.Config({}, num_warps=1)], key=key)
    return triton.autotune(configs=[triton.Config({}, num_warps=w) for w in warps], key=key)


# ----------------------------------------------------------------------------- NSA order
# The forward and backward kernels repeat their tile loads and masks inline: a shared
# @triton.jit helper would cost registers and speed in these hot loops.


@triton.jit
def _nsa_fwd_kernel(
    Q,
    K,
    V,
    IDX,
    KBOS,
    QPOS,
    KVM,
    Out,
    LSE,
    scale,
    S,
    stride_qn,
    stride_qh,
    stride_kn,
    stride_kh,
    stride_in,
    stride_ih,
    G: tl.constexpr,
    GP: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BS: tl.constexpr,
    PREC: tl.constexpr,
    HAS_KVM: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    bos = tl.load(KBOS + t).to(tl.int64)
    pos = tl.load(QPOS + t).to(tl.int64)
    offs_g = tl.arange(0, GP)
    offs_d = tl.arange(0, BLOCK_D)
    offs_k = tl.arange(0, BS)
    gmask = offs_g < G
    dmask = offs_d < D
    hq = h * G + offs_g
    q = tl.load(
        Q + t * stride_qn + hq[:, None] * stride_qh + offs_d[None, :],
        mask=gmask[:, None] & dmask[None, :],
        other=0.0,
    )
    m_i = tl.full([GP], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([GP], dtype=tl.float32)
    acc = tl.zeros([GP, BLOCK_D], dtype=tl.float32)
    for s in range(S):
        j = tl.load(IDX + t * stride_in + h * stride_ih + s)
        if j >= 0:
            kpos = j * BS + offs_k
            kmask = kpos <= pos
            if HAS_KVM:
                kmask = kmask & (tl.load(KVM + bos + kpos, mask=kmask, other=0) != 0)
            krow = bos + kpos
            kv_off = krow[:, None] * stride_kn + h * stride_kh + offs_d[None, :]
            kvm = kmask[:, None] & dmask[None, :]
            k = tl.load(K + kv_off, mask=kvm, other=0.0)
            v = tl.load(V + kv_off, mask=kvm, other=0.0)
            sc = tl.dot(q, tl.trans(k), input_precision=PREC) * scale
            sc = tl.where(kmask[None, :], sc, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(sc, 1))
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # a block with no key
            alpha = tl.exp(m_i - m_use)
            p = tl.exp(sc - m_use[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PREC)
            m_i = m_new
    has = l_i > 0
    out = acc / tl.where(has, l_i, 1.0)[:, None]
    lse = tl.where(has, m_i + tl.log(tl.where(has, l_i, 1.0)), float("-inf"))
    o_off = t * stride_qn + hq[:, None] * stride_qh + offs_d[None, :]
    tl.store(Out + o_off, out.to(Out.dtype.element_ty), mask=gmask[:, None] & dmask[None, :])
    tl.store(LSE + t * (stride_qn // D) + hq, lse, mask=gmask)


# ----------------------------------------------------------------------------- FSA order


@_tuned(["G", "D", "BS"], (4, 8))
@triton.jit
def _fsa_fwd_kernel(
    Q,
    K,
    V,
    TOK,
    SLOT,
    QPOS,
    KVM,
    CH_KEY,
    CH_START,
    CH_END,
    BLK_BOS,
    BLK_J,
    BLK_LEN,
    OP,
    LP,
    scale,
    NGB,
    stride_qn,
    stride_qh,
    stride_kn,
    stride_kh,
    stride_on,
    stride_os,
    stride_oh,
    stride_ln,
    stride_ls,
    G: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    EPI: tl.constexpr,
    PREC: tl.constexpr,
    HAS_KVM: tl.constexpr,
):
    ch = tl.program_id(0)
    key = tl.load(CH_KEY + ch)
    h = key // NGB
    gb = key % NGB
    start = tl.load(CH_START + ch)
    end = tl.load(CH_END + ch)
    if end > start:
        bos = tl.load(BLK_BOS + gb).to(tl.int64)
        j = tl.load(BLK_J + gb)
        seqlen = tl.load(BLK_LEN + gb)
        offs_k = tl.arange(0, BS)
        offs_d = tl.arange(0, BLOCK_D)
        dmask = offs_d < D
        kpos = j * BS + offs_k
        kmask = kpos < seqlen
        if HAS_KVM:
            kmask = kmask & (tl.load(KVM + bos + kpos, mask=kmask, other=0) != 0)
        kv_off = (bos + kpos)[:, None] * stride_kn + h * stride_kh + offs_d[None, :]
        kvm = kmask[:, None] & dmask[None, :]
        k = tl.load(K + kv_off, mask=kvm, other=0.0)
        v = tl.load(V + kv_off, mask=kvm, other=0.0)
        offs_m = tl.arange(0, BLOCK_M)
        e_in = offs_m // G
        hq = h * G + offs_m % G
        row_ok = offs_m < EPI * G
        for e0 in range(start, end, EPI):
            e = e0 + e_in
            rmask = row_ok & (e < end)
            t = tl.load(TOK + e, mask=rmask, other=0).to(tl.int64)
            s = tl.load(SLOT + e, mask=rmask, other=0).to(tl.int64)
            qm = rmask[:, None] & dmask[None, :]
            q = tl.load(
                Q + t[:, None] * stride_qn + hq[:, None] * stride_qh + offs_d[None, :],
                mask=qm,
                other=0.0,
            )
            sc = tl.dot(q, tl.trans(k), input_precision=PREC) * scale
            qpos = tl.load(QPOS + t, mask=rmask, other=0)
            allowed = rmask[:, None] & kmask[None, :] & (kpos[None, :] <= qpos[:, None])
            sc = tl.where(allowed, sc, float("-inf"))
            m = tl.max(sc, 1)
            m = tl.where(m == float("-inf"), 0.0, m)  # padded row, or no key left in the block
            p = tl.exp(sc - m[:, None])
            den = tl.sum(p, 1)
            has = den > 0
            den = tl.where(has, den, 1.0)
            o = tl.dot(p.to(v.dtype), v, input_precision=PREC) / den[:, None]
            o_off = (
                t[:, None] * stride_on
                + s[:, None] * stride_os
                + hq[:, None] * stride_oh
                + offs_d[None, :]
            )
            tl.store(OP + o_off, o.to(OP.dtype.element_ty), mask=qm)
            lse = tl.where(has, m + tl.log(den), float("-inf"))
            tl.store(LP + t * stride_ln + s * stride_ls + hq, lse, mask=rmask)


@triton.jit
def _used_slots(
    IDX,
    t,
    h,
    S,
    stride_in,
    stride_ih,
    G: tl.constexpr,
    GP: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    # token t, KV head h: slot/dim offsets, its query heads, masks, and which
    # (slot, query head) pairs hold a partial result ([BLOCK_S, GP], unused slots are -1)
    offs_s = tl.arange(0, BLOCK_S)
    offs_g = tl.arange(0, GP)
    offs_d = tl.arange(0, BLOCK_D)
    gmask = offs_g < G
    idx = tl.load(IDX + t * stride_in + h * stride_ih + offs_s, mask=offs_s < S, other=-1)
    valid = (idx >= 0)[:, None] & gmask[None, :]
    return offs_s, offs_d, h * G + offs_g, gmask, offs_d < D, valid


@_tuned(["G", "D", "BLOCK_S"], (1, 2, 4))
@triton.jit
def _fsa_reduce_kernel(
    OP,
    LP,
    IDX,
    Out,
    LSE,
    S,
    HQ,
    stride_on,
    stride_os,
    stride_oh,
    stride_ln,
    stride_ls,
    stride_in,
    stride_ih,
    stride_qn,
    stride_qh,
    G: tl.constexpr,
    GP: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    offs_s, offs_d, hq, gmask, dmask, valid = _used_slots(
        IDX, t, h, S, stride_in, stride_ih, G, GP, D, BLOCK_D, BLOCK_S
    )
    lse_s = tl.load(
        LP + t * stride_ln + offs_s[:, None] * stride_ls + hq[None, :],
        mask=valid,
        other=float("-inf"),
    )
    mx = tl.max(lse_s, 0)
    mx = tl.where(mx == float("-inf"), 0.0, mx)
    w = tl.where(valid, tl.exp(lse_s - mx[None, :]), 0.0)
    den = tl.sum(w, 0)
    o_off = t * stride_on + offs_s[:, None, None] * stride_os + hq[None, :, None] * stride_oh
    o_s = tl.load(
        OP + o_off + offs_d[None, None, :], mask=valid[:, :, None] & dmask[None, None, :], other=0.0
    ).to(tl.float32)
    has = den > 0
    o = tl.sum(w[:, :, None] * o_s, 0) / tl.where(has, den, 1.0)[:, None]
    lse = tl.where(has, mx + tl.log(tl.where(has, den, 1.0)), float("-inf"))
    q_off = t * stride_qn + hq[:, None] * stride_qh + offs_d[None, :]
    tl.store(Out + q_off, o.to(Out.dtype.element_ty), mask=gmask[:, None] & dmask[None, :])
    tl.store(LSE + t * HQ + hq, lse, mask=gmask)


# ----------------------------------------------------------------------------- backward
#
# One backward serves both loop orders, without atomics: dQ in the NSA order (one
# program per (query, KV head) walks the query's blocks), dK/dV in the FSA order (one
# program per work chunk of a (KV head, block) walks the queries that selected the
# block, from the block -> query index). A block whose list fits in one chunk is stored
# straight into dK/dV; a longer list is cut into chunks whose fp32 partial sums a reduce
# kernel adds up, so the float scratch is bounded (see ``backward_scratch_bytes``).


@triton.jit
def _dq_kernel(
    Q,
    K,
    V,
    IDX,
    KBOS,
    QPOS,
    KVM,
    Out,
    DO,
    LSE,
    DELTA,
    DQ,
    scale,
    S,
    stride_qn,
    stride_qh,
    stride_kn,
    stride_kh,
    stride_in,
    stride_ih,
    G: tl.constexpr,
    GP: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BS: tl.constexpr,
    PREC: tl.constexpr,
    HAS_KVM: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    bos = tl.load(KBOS + t).to(tl.int64)
    pos = tl.load(QPOS + t).to(tl.int64)
    offs_g = tl.arange(0, GP)
    offs_d = tl.arange(0, BLOCK_D)
    offs_k = tl.arange(0, BS)
    gmask = offs_g < G
    dmask = offs_d < D
    hq = h * G + offs_g
    qm = gmask[:, None] & dmask[None, :]
    q_off = t * stride_qn + hq[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(Q + q_off, mask=qm, other=0.0)
    do = tl.load(DO + q_off, mask=qm, other=0.0)
    lse = tl.load(LSE + t * (stride_qn // D) + hq, mask=gmask, other=0.0)
    o = tl.load(Out + q_off, mask=qm, other=0.0)
    delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)  # rowsum(dO * O), for dK/dV too
    tl.store(DELTA + t * (stride_qn // D) + hq, delta, mask=gmask)
    dq = tl.zeros([GP, BLOCK_D], dtype=tl.float32)
    for s in range(S):
        j = tl.load(IDX + t * stride_in + h * stride_ih + s)
        if j >= 0:
            kpos = j * BS + offs_k
            kmask = kpos <= pos
            if HAS_KVM:
                kmask = kmask & (tl.load(KVM + bos + kpos, mask=kmask, other=0) != 0)
            kv_off = (bos + kpos)[:, None] * stride_kn + h * stride_kh + offs_d[None, :]
            kvm = kmask[:, None] & dmask[None, :]
            k = tl.load(K + kv_off, mask=kvm, other=0.0)
            v = tl.load(V + kv_off, mask=kvm, other=0.0)
            sc = tl.dot(q, tl.trans(k), input_precision=PREC) * scale
            p = tl.where(gmask[:, None] & kmask[None, :], tl.exp(sc - lse[:, None]), 0.0)
            dp = tl.dot(do, tl.trans(v), input_precision=PREC)
            ds = p * (dp - delta[:, None])
            dq += tl.dot(ds.to(k.dtype), k, input_precision=PREC)
    tl.store(DQ + q_off, (dq * scale).to(DQ.dtype.element_ty), mask=qm)


@_tuned(["G", "D", "BS"], (4, 8))
@triton.jit
def _dkv_kernel(
    Q,
    K,
    V,
    DO,
    LSE,
    DELTA,
    TOK,
    QPOS,
    KVM,
    CH_KEY,
    CH_START,
    CH_END,
    CH_PART,
    BLK_BOS,
    BLK_J,
    BLK_LEN,
    DK,
    DV,
    DKP,
    DVP,
    scale,
    NGB,
    stride_qn,
    stride_qh,
    stride_kn,
    stride_kh,
    G: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    EPI: tl.constexpr,
    PREC: tl.constexpr,
    HAS_KVM: tl.constexpr,
):
    ch = tl.program_id(0)
    key = tl.load(CH_KEY + ch)
    h = key // NGB
    gb = key % NGB
    start = tl.load(CH_START + ch)
    end = tl.load(CH_END + ch)
    if end > start:
        bos = tl.load(BLK_BOS + gb).to(tl.int64)
        j = tl.load(BLK_J + gb)
        seqlen = tl.load(BLK_LEN + gb)
        offs_k = tl.arange(0, BS)
        offs_d = tl.arange(0, BLOCK_D)
        dmask = offs_d < D
        kpos = j * BS + offs_k
        inside = kpos < seqlen
        kmask = inside
        if HAS_KVM:
            kmask = kmask & (tl.load(KVM + bos + kpos, mask=kmask, other=0) != 0)
        kv_off = (bos + kpos)[:, None] * stride_kn + h * stride_kh + offs_d[None, :]
        kvm = kmask[:, None] & dmask[None, :]
        k = tl.load(K + kv_off, mask=kvm, other=0.0)
        v = tl.load(V + kv_off, mask=kvm, other=0.0)
        dk = tl.zeros([BS, BLOCK_D], dtype=tl.float32)
        dv = tl.zeros([BS, BLOCK_D], dtype=tl.float32)
        offs_m = tl.arange(0, BLOCK_M)
        e_in = offs_m // G
        hq = h * G + offs_m % G
        row_ok = offs_m < EPI * G
        hstride = stride_qn // D
        for e0 in range(start, end, EPI):
            e = e0 + e_in
            rmask = row_ok & (e < end)
            t = tl.load(TOK + e, mask=rmask, other=0).to(tl.int64)
            qm = rmask[:, None] & dmask[None, :]
            q_off = t[:, None] * stride_qn + hq[:, None] * stride_qh + offs_d[None, :]
            q = tl.load(Q + q_off, mask=qm, other=0.0)
            do = tl.load(DO + q_off, mask=qm, other=0.0)
            lse = tl.load(LSE + t * hstride + hq, mask=rmask, other=0.0)
            delta = tl.load(DELTA + t * hstride + hq, mask=rmask, other=0.0)
            qpos = tl.load(QPOS + t, mask=rmask, other=0)
            sc = tl.dot(q, tl.trans(k), input_precision=PREC) * scale
            allowed = rmask[:, None] & kmask[None, :] & (kpos[None, :] <= qpos[:, None])
            p = tl.where(allowed, tl.exp(sc - lse[:, None]), 0.0)
            dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PREC)
            dp = tl.dot(do, tl.trans(v), input_precision=PREC)
            ds = p * (dp - delta[:, None])
            dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PREC)
        part = tl.load(CH_PART + ch)
        if part < 0:  # the block's only chunk: its dK/dV are final
            om = inside[:, None] & dmask[None, :]
            tl.store(DK + kv_off, (dk * scale).to(DK.dtype.element_ty), mask=om)
            tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=om)
        else:
            p_off = part.to(tl.int64) * (BS * BLOCK_D) + offs_k[:, None] * BLOCK_D + offs_d[None, :]
            tl.store(DKP + p_off, dk * scale)
            tl.store(DVP + p_off, dv)


@_tuned(["D", "BS"], (2, 4))
@triton.jit
def _dkv_reduce_kernel(
    DKP,
    DVP,
    HP_OFF,
    BLK_BOS,
    BLK_J,
    BLK_LEN,
    DK,
    DV,
    NGB,
    stride_kn,
    stride_kh,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BS: tl.constexpr,
):
    # dK/dV of one (KV head, block) that was cut into several chunks: sum their partials
    key = tl.program_id(0)
    h = key // NGB
    gb = key % NGB
    c0 = tl.load(HP_OFF + key)
    c1 = tl.load(HP_OFF + key + 1)
    if c1 > c0:
        offs_k = tl.arange(0, BS)
        offs_d = tl.arange(0, BLOCK_D)
        p_off = offs_k[:, None] * BLOCK_D + offs_d[None, :]
        dk = tl.zeros([BS, BLOCK_D], dtype=tl.float32)
        dv = tl.zeros([BS, BLOCK_D], dtype=tl.float32)
        pk = DKP + c0.to(tl.int64) * (BS * BLOCK_D) + p_off
        pv = DVP + c0.to(tl.int64) * (BS * BLOCK_D) + p_off
        for _ in range(c0, c1):
            dk += tl.load(pk)
            dv += tl.load(pv)
            pk += BS * BLOCK_D
            pv += BS * BLOCK_D
        bos = tl.load(BLK_BOS + gb).to(tl.int64)
        kpos = tl.load(BLK_J + gb) * BS + offs_k
        kvm = (kpos < tl.load(BLK_LEN + gb))[:, None] & (offs_d < D)[None, :]
        kv_off = (bos + kpos)[:, None] * stride_kn + h * stride_kh + offs_d[None, :]
        tl.store(DK + kv_off, dk.to(DK.dtype.element_ty), mask=kvm)
        tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=kvm)


# ----------------------------------------------------------------------------- launchers


def _warps(default: int) -> int:
    return 1 if interpreter_on() else default


def nsa_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    idx: torch.Tensor,
    kbos: torch.Tensor,
    qpos: torch.Tensor,
    kvm: torch.Tensor | None,
    block_size: int,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """NSA-order forward on packed tensors; returns ``o [N, HQ, D]`` and ``lse [N, HQ]`` (fp32).

    ``kbos [N]`` is the key row where each query's sequence starts, ``qpos [N]`` the
    query's position among its sequence's keys, ``kvm`` an optional int8 ``[N_k]`` key
    mask (0 = padding).
    """
    n, hq, d = q.shape
    hkv = k.shape[1]
    g = hq // hkv
    o = torch.empty_like(q)
    lse = torch.empty(n, hq, device=q.device, dtype=torch.float32)
    if n == 0:
        return o, lse
    _nsa_fwd_kernel[(n, hkv)](
        q,
        k,
        v,
        idx,
        kbos,
        qpos,
        k if kvm is None else kvm,
        o,
        lse,
        scale,
        idx.shape[2],
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        idx.stride(0),
        idx.stride(1),
        G=g,
        GP=_pow2(g),
        D=d,
        BLOCK_D=_pow2(d),
        BS=block_size,
        PREC=dot_precision(q.dtype),
        HAS_KVM=kvm is not None,
        num_warps=_warps(4),
    )
    return o, lse


#: Steps of ``BLOCK_M`` rows one FSA program makes over the tokens that selected its
#: block (so a work chunk holds ``EPI * FSA_STEPS`` entries); a tuning knob, see
#: ``benchmarks/fsa_profile.py``. The interpreter uses 2 to keep tests fast.
FSA_STEPS = 8


def fsa_tiling(g: int) -> tuple[int, int, int]:
    """Rows per step of the FSA kernels (a power of two >= G), entries per step, entries per program.

    A block selected by many tokens (the forced initial block is selected by all) is
    split into chunks of ``entries per program`` handled by separate programs, so no
    program walks a whole sequence while the others idle.
    """
    block_m = max(_pow2(g), 32 if interpreter_on() else 64)
    epi = block_m // g
    return block_m, epi, epi * (2 if interpreter_on() else FSA_STEPS)


def fsa_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    idx: torch.Tensor,
    plan: dict[str, torch.Tensor],
    block_size: int,
    scale: float,
    kvm: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """FSA-order forward (main kernel + reduce kernel); returns ``o`` and fp32 ``lse``."""
    n, hq, d = q.shape
    hkv = k.shape[1]
    s_max = idx.shape[2]
    g = hq // hkv
    ngb = plan["blk_bos"].numel()
    part_dtype = torch.float32 if q.dtype == torch.float32 else q.dtype
    op = torch.empty(n, s_max, hq, d, device=q.device, dtype=part_dtype)
    lp = torch.empty(n, s_max, hq, device=q.device, dtype=torch.float32)
    o = torch.empty_like(q)
    lse = torch.empty(n, hq, device=q.device, dtype=torch.float32)
    if n == 0:
        return o, lse
    block_m, epi, _ = fsa_tiling(g)
    nch = plan["ch_key"].numel()
    if nch > 0:
        _fsa_fwd_kernel[(nch,)](
            q,
            k,
            v,
            plan["tok"],
            plan["slot"],
            plan["qpos"],
            k if kvm is None else kvm,
            plan["ch_key"],
            plan["ch_start"],
            plan["ch_end"],
            plan["blk_bos"],
            plan["blk_j"],
            plan["blk_len"],
            op,
            lp,
            scale,
            ngb,
            q.stride(0),
            q.stride(1),
            k.stride(0),
            k.stride(1),
            op.stride(0),
            op.stride(1),
            op.stride(2),
            lp.stride(0),
            lp.stride(1),
            G=g,
            D=d,
            BLOCK_D=_pow2(d),
            BS=block_size,
            BLOCK_M=block_m,
            EPI=epi,
            PREC=dot_precision(q.dtype),
            HAS_KVM=kvm is not None,
        )
    _fsa_reduce_kernel[(n, hkv)](
        op,
        lp,
        idx,
        o,
        lse,
        s_max,
        hq,
        op.stride(0),
        op.stride(1),
        op.stride(2),
        lp.stride(0),
        lp.stride(1),
        idx.stride(0),
        idx.stride(1),
        q.stride(0),
        q.stride(1),
        G=g,
        GP=_pow2(g, 1),
        D=d,
        BLOCK_D=_pow2(d),
        BLOCK_S=_pow2(s_max, 1),
    )
    return o, lse


def backward_tiling(
    n: int, hq: int, hkv: int, d: int, s: int, block_size: int, dtype: torch.dtype
) -> tuple[int, int, int, int]:
    """Tiling of the dK/dV pass: rows per step, entries per step, entries per chunk, and
    the number of fp32 partial slots (each ``[block_size, pow2(D)]`` for dK and for dV).

    A (KV head, block) listed by more entries than a chunk is cut into chunks whose
    partials are summed afterwards. Such blocks have fewer than ``2 * entries / chunk``
    chunks in all, so the chunk is made long enough (at least the forward's) that the
    partials take at most as many bytes as ``q``: ``2E / chunk * block_size * pow2(D) * 8
    <= N * HQ * D * itemsize(q)`` with ``E = N * H_kv * S`` (the slots, used or not).
    Everything depends on shapes only (no device read).
    """
    block_m, epi, chunk = fsa_tiling(hq // hkv)
    entries = n * hkv * s
    q_bytes = max(1, n * hq * d * dtype.itemsize)
    per_slot = block_size * _pow2(d) * 4 * 2
    chunk = max(chunk, -(-2 * entries * per_slot // q_bytes))
    return block_m, epi, chunk, max(1, 2 * entries // chunk)


def backward_scratch_bytes(
    n: int, hq: int, hkv: int, d: int, s: int, block_size: int, dtype: torch.dtype, ngb: int
) -> dict[str, int]:
    """Bytes of the temporary buffers :func:`selected_backward` allocates (besides its
    outputs dQ, dK, dV and the block -> query index, which the FSA forward built).

    Args:
        n: packed queries ``N`` (of ``q [N, HQ, D]``).
        hq: query heads ``HQ``.
        hkv: key/value heads.
        d: head dimension ``D``.
        s: slots per query (``block_indices.shape[-1]``).
        block_size: tokens per key/value block.
        dtype: dtype of ``q``.
        ngb: blocks of the plan (``plan["blk_bos"].numel()``).

    Returns:
        ``partials`` (fp32 dK/dV partials of blocks cut into chunks), ``delta`` (fp32
        ``rowsum(dO * O)``, ``[N, HQ]``), ``chunks`` (the int64 work-chunk lists) and
        their ``total``; compare with ``q_bytes``.
    """
    _, _, chunk, slots = backward_tiling(n, hq, hkv, d, s, block_size, dtype)
    nch = -(-n * hkv * s // chunk) + hkv * ngb
    out = {
        "partials": 2 * slots * block_size * _pow2(d) * 4,
        "delta": n * hq * 4,
        "chunks": 4 * nch * 8 + (hkv * ngb + 1) * 8 * 2,
    }
    out["total"] = sum(out.values())
    out["q_bytes"] = n * hq * d * dtype.itemsize
    return out


def selected_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    idx: torch.Tensor,
    kbos: torch.Tensor,
    qpos: torch.Tensor,
    kvm: torch.Tensor | None,
    plan: dict[str, torch.Tensor],
    o: torch.Tensor,
    lse: torch.Tensor,
    do: torch.Tensor,
    block_size: int,
    scale: float,
    chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Backward of both loop orders, without atomics; returns ``dq, dk, dv``.

    dQ: one program per (query, KV head) over the query's blocks. dK/dV: one program per
    work chunk of the block -> query index ``plan`` (the entries of
    ``function.build_plan``); a block with one chunk stores its dK/dV directly, longer
    lists go through fp32 partials and a reduce kernel. ``chunk`` overrides the entries
    per chunk (tests use it to force partials); the default bounds the scratch (see
    :func:`backward_tiling`).
    """
    from lc_kernels.selected_attention.function import backward_chunks

    n, hq, d = q.shape
    hkv = k.shape[1]
    s_max = idx.shape[2]
    g = hq // hkv
    dq = torch.empty_like(q)
    dk = torch.zeros_like(k)
    dv = torch.zeros_like(v)
    if n == 0 or k.shape[0] == 0:
        return dq.zero_(), dk, dv
    delta = torch.empty(n, hq, device=q.device, dtype=torch.float32)  # written by _dq_kernel
    kv_mask = k if kvm is None else kvm
    _dq_kernel[(n, hkv)](
        q,
        k,
        v,
        idx,
        kbos,
        qpos,
        kv_mask,
        o,
        do,
        lse,
        delta,
        dq,
        scale,
        s_max,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        idx.stride(0),
        idx.stride(1),
        G=g,
        GP=_pow2(g),
        D=d,
        BLOCK_D=_pow2(d),
        BS=block_size,
        PREC=dot_precision(q.dtype),
        HAS_KVM=kvm is not None,
        num_warps=_warps(4),
    )
    block_m, epi, auto_chunk, slots = backward_tiling(n, hq, hkv, d, s_max, block_size, q.dtype)
    if chunk is not None:  # explicit chunk: enough partial slots for it
        auto_chunk, slots = chunk, max(1, 2 * n * hkv * s_max // chunk)
    ngb = plan["blk_bos"].numel()
    ch = backward_chunks(plan["off"], auto_chunk, n * hkv * s_max)
    bd = _pow2(d)
    dkp = torch.empty(slots, block_size, bd, device=q.device, dtype=torch.float32)
    dvp = torch.empty_like(dkp)
    _dkv_kernel[(ch["ch_key"].numel(),)](
        q,
        k,
        v,
        do,
        lse,
        delta,
        plan["tok"],
        plan["qpos"],
        kv_mask,
        ch["ch_key"],
        ch["ch_start"],
        ch["ch_end"],
        ch["ch_part"],
        plan["blk_bos"],
        plan["blk_j"],
        plan["blk_len"],
        dk,
        dv,
        dkp,
        dvp,
        scale,
        ngb,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        G=g,
        D=d,
        BLOCK_D=bd,
        BS=block_size,
        BLOCK_M=block_m,
        EPI=epi,
        PREC=dot_precision(q.dtype),
        HAS_KVM=kvm is not None,
    )
    _dkv_reduce_kernel[(hkv * ngb,)](
        dkp,
        dvp,
        ch["hp_off"],
        plan["blk_bos"],
        plan["blk_j"],
        plan["blk_len"],
        dk,
        dv,
        ngb,
        k.stride(0),
        k.stride(1),
        D=d,
        BLOCK_D=bd,
        BS=block_size,
    )
    return dq, dk, dv
