"""Triton kernels of the decode ops: block-wise top-k and split-K decode attention.

Top-k: every score becomes one int64 sort key, ``(order-preserving int32 of the fp32
score) << 32 | (2**32 - 1 - position)``, so one descending integer sort orders by score
and, among equal scores, by lower position first: the tie rule is built into the key.
The first stage sorts each ``block_size`` block and keeps its best ``min(k, block)``
keys; merge rounds sort groups of candidates (a power of two >= 2k) and keep ``k`` until
one group is left. Every round is exact.

Attention: flash-decoding. The positions (the whole cache, or a list of gathered
positions) are cut into splits; one program per (batch, KV head, split) loads the query
heads of the GQA group as the M side of ``tl.dot`` (padded to 16), walks its split in
blocks of ``BLOCK_N`` with an online softmax, and writes a partial (max, sum, output).
A second kernel combines the splits. Keys and values are addressed with the cache's own
strides, and gathered positions are read in place (no gathered copy).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from lc_kernels._common import dot_precision, interpreter_on

_LOW = 0xFFFFFFFF


@triton.jit
def _score_keys(x, pos):
    """int64 sort keys of fp32 scores ``x`` at positions ``pos`` (see the module doc)."""
    x = x + 0.0  # -0.0 -> +0.0 so the two zeros tie, as in float comparison
    bits = x.to(tl.int32, bitcast=True)
    ordered = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    return (ordered.to(tl.int64) << 32) + (0xFFFFFFFF - pos.to(tl.int64))


@triton.jit
def _bit(RANK: tl.constexpr, AXIS: tl.constexpr):
    """0/1 along hypercube axis ``AXIS`` of a rank-``RANK`` tensor, 1 elsewhere in shape."""
    return tl.reshape(tl.arange(0, 2), [1] * AXIS + [2] + [1] * (RANK - AXIS - 1))


@triton.jit
def _exchange(h, AXIS: tl.constexpr, desc):
    """Compare-exchange the element pairs along hypercube axis ``AXIS`` of ``h``.

    Where ``desc`` holds, the pair's first element receives the larger value, else the
    smaller. Uses max/min reductions over the pair rather than bit tricks.
    """
    hi = tl.max(h, axis=AXIS, keep_dims=True)
    lo = tl.min(h, axis=AXIS, keep_dims=True)
    second = _bit(len(h.shape), AXIS) == 1
    return tl.where(second != desc, hi, lo)


@triton.jit
def _bitonic_merge_bits(h, S: tl.constexpr):
    """Bitonic merge of runs of ``2**S`` positions (bits ``S-1 .. 0``) of the hypercube
    ``h [units, 2, ..., 2]``; runs whose bit ``S`` is 0 end descending, the others
    ascending (all descending when bit ``S`` does not exist)."""
    RANK: tl.constexpr = len(h.shape)
    LOGN: tl.constexpr = RANK - 1
    if S < LOGN:
        desc = _bit(RANK, LOGN - S) == 0
    else:
        desc = tl.full([1] * RANK, 1, tl.int1)
    for i in tl.static_range(S):
        h = _exchange(h, LOGN - (S - 1 - i), desc)
    return h


@triton.jit
def _row_topk(x, UNITS: tl.constexpr, LOG_N: tl.constexpr, LOG_K: tl.constexpr):
    """Largest ``2**LOG_K`` of each row of ``x [UNITS, 2**LOG_N]``, sorted descending.

    Bitonic: sort runs of ``2**LOG_K`` in alternating directions, then repeatedly take
    the elementwise max of neighbouring runs (one descending, one ascending: the result
    holds the top half of both, as a bitonic run) and merge, halving the row each round.
    """
    if LOG_K == 0:
        out = tl.max(x, axis=1, keep_dims=True)
    else:
        h = tl.reshape(x, [UNITS] + [2] * LOG_N)
        for s in tl.static_range(1, LOG_K + 1):
            h = _bitonic_merge_bits(h, s)
        for r in tl.static_range(LOG_N - LOG_K):
            h = tl.max(h, axis=LOG_N - r - LOG_K)
            h = _bitonic_merge_bits(h, LOG_K)
        out = tl.reshape(h, [UNITS, 2**LOG_K])
    return out


# The first and merge top-k kernels repeat their row loads inline on purpose (a shared
# helper would cost registers and speed).
@triton.jit
def _topk_first_kernel(
    scores,
    valid,
    cand,
    s_b,
    s_h,
    s_s,
    seq,
    n_blocks,
    n_units,
    n_cand,
    HEADS: tl.constexpr,
    BLOCK: tl.constexpr,
    KEEP: tl.constexpr,
    UNITS: tl.constexpr,
    LOG_BLOCK: tl.constexpr,
    LOG_KEEP: tl.constexpr,
    HAS_VALID: tl.constexpr,
):
    # one unit = one (row, block); a program sorts UNITS units as rows of a 2-D tile
    u = tl.program_id(0) * UNITS + tl.arange(0, UNITS)
    umask = u < n_units
    row = (u // n_blocks).to(tl.int64)
    blk = u % n_blocks
    b = row // HEADS
    h = row % HEADS
    r = tl.arange(0, BLOCK)
    pos = blk[:, None] * BLOCK + r[None, :]
    if HAS_VALID:
        limit = tl.load(valid + b, mask=umask, other=0).to(tl.int32)
    else:
        limit = tl.full([UNITS], seq, tl.int32)
    ok = umask[:, None] & (pos < limit[:, None])
    ptr = scores + (b * s_b + h * s_h)[:, None] + pos.to(tl.int64) * s_s
    x = tl.load(ptr, mask=ok, other=0.0)
    x = tl.where(ok, x.to(tl.float32), float("-inf"))
    keys = _row_topk(_score_keys(x, pos), UNITS, LOG_BLOCK, LOG_KEEP)
    rk = tl.arange(0, 2**LOG_KEEP)
    dst = cand + (row * n_cand + blk * KEEP)[:, None] + rk[None, :]
    tl.store(dst, keys, mask=umask[:, None] & (rk < KEEP)[None, :])


@triton.jit
def _topk_merge_kernel(
    cand_in,
    cand_out,
    n_in,
    n_out,
    n_groups,
    n_units,
    BLOCK: tl.constexpr,
    KEEP: tl.constexpr,
    UNITS: tl.constexpr,
    LOG_BLOCK: tl.constexpr,
    LOG_KEEP: tl.constexpr,
):
    u = tl.program_id(0) * UNITS + tl.arange(0, UNITS)
    umask = u < n_units
    row = (u // n_groups).to(tl.int64)
    grp = u % n_groups
    r = tl.arange(0, BLOCK)
    off = grp[:, None] * BLOCK + r[None, :]
    lowest = -9223372036854775808
    ok = umask[:, None] & (off < n_in)
    keys = tl.load(cand_in + row[:, None] * n_in + off, mask=ok, other=lowest)
    keys = _row_topk(keys, UNITS, LOG_BLOCK, LOG_KEEP)
    rk = tl.arange(0, 2**LOG_KEEP)
    dst = cand_out + (row * n_out + grp * KEEP)[:, None] + rk[None, :]
    tl.store(dst, keys, mask=umask[:, None] & (rk < KEEP)[None, :])


def _log2(n: int) -> int:
    return n.bit_length() - 1


def _warps(block: int) -> int:
    """More warps for the long rows of a merge round (fewer registers per thread)."""
    return 8 if block >= 2048 else 4


def _units_per_program(n_units: int) -> int:
    """1 on a GPU; in the interpreter many units per program (its cost is per operation)."""
    return min(triton.next_power_of_2(n_units), 256) if interpreter_on() else 1


def block_topk_triton(
    scores: torch.Tensor, k: int, block_size: int, valid_len: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton version of :func:`lc_kernels.decode.reference.block_topk_torch` (same result)."""
    b, h, s = scores.shape
    rows = b * h
    nb = triton.cdiv(s, block_size)
    keep = min(k, block_size)
    n = nb * keep
    cand = torch.empty(rows, n, dtype=torch.int64, device=scores.device)
    valid = valid_len if valid_len is not None else cand  # dummy pointer when unused
    units = rows * nb
    per = _units_per_program(units)
    _topk_first_kernel[(triton.cdiv(units, per),)](
        scores, valid, cand, *scores.stride(), s, nb, units, n,
        HEADS=h, BLOCK=block_size, KEEP=keep, UNITS=per, LOG_BLOCK=_log2(block_size),
        LOG_KEEP=_log2(triton.next_power_of_2(keep)), HAS_VALID=valid_len is not None,
        num_warps=_warps(block_size),
    )  # fmt: skip
    group = max(16, triton.next_power_of_2(2 * k))
    while n > k:
        groups = triton.cdiv(n, group)
        n_out = groups * k
        nxt = torch.empty(rows, n_out, dtype=torch.int64, device=scores.device)
        units = rows * groups
        per = _units_per_program(units)
        _topk_merge_kernel[(triton.cdiv(units, per),)](
            cand, nxt, n, n_out, groups, units, BLOCK=group, KEEP=k, UNITS=per,
            LOG_BLOCK=_log2(group), LOG_KEEP=_log2(triton.next_power_of_2(k)),
            num_warps=_warps(group),
        )  # fmt: skip
        cand, n = nxt, n_out
    keys = cand[:, :k]
    idx = (_LOW - (keys & _LOW)).view(b, h, k)
    return scores.gather(-1, idx), idx


@triton.jit
def _decode_partial_kernel(
    q,
    k,
    v,
    idx,
    valid,
    logits,
    m_part,
    l_part,
    o_part,
    sq_b,
    sq_h,
    sq_d,
    sk_b,
    sk_s,
    sk_h,
    sk_d,
    sv_b,
    sv_s,
    sv_h,
    sv_d,
    si_b,
    si_h,
    si_k,
    n_pos,
    seq,
    split_len,
    n_split,
    scale,
    HQ: tl.constexpr,
    GROUP: tl.constexpr,
    HEADS: tl.constexpr,
    PER_HEAD: tl.constexpr,
    SPARSE: tl.constexpr,
    HAS_VALID: tl.constexpr,
    WRITE_LOGITS: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PREC: tl.constexpr,
):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    if PER_HEAD:
        b = (pid // HQ).to(tl.int64)
        hq0 = pid % HQ
        kvh = hq0 // GROUP
        row = hq0
    else:
        b = (pid // (HQ // GROUP)).to(tl.int64)
        kvh = pid % (HQ // GROUP)
        hq0 = kvh * GROUP
        row = kvh
    hh = tl.arange(0, BLOCK_H)
    hmask = hh < HEADS
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    qt = tl.load(
        q + b * sq_b + (hq0 + hh)[:, None] * sq_h + d[None, :] * sq_d,
        mask=hmask[:, None] & dmask[None, :],
        other=0.0,
    )
    limit = n_pos
    if HAS_VALID:
        limit = tl.minimum(tl.load(valid + b).to(tl.int32), n_pos)
    lo = split * split_len
    hi = tl.minimum(lo + split_len, n_pos)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)
    k_base = k + b * sk_b + kvh * sk_h
    v_base = v + b * sv_b + kvh * sv_h
    for start in range(lo, hi, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        in_range = offs < hi
        if SPARSE:
            pos = tl.load(idx + b * si_b + row * si_h + offs * si_k, mask=in_range, other=-1)
            pos = pos.to(tl.int64)
            ok = pos >= 0
        else:
            pos = offs.to(tl.int64)
            ok = in_range & (offs < limit)
        kt = tl.load(
            k_base + pos[:, None] * sk_s + d[None, :] * sk_d,
            mask=ok[:, None] & dmask[None, :],
            other=0.0,
        )
        s = tl.dot(qt, tl.trans(kt), input_precision=PREC) * scale
        s = tl.where(ok[None, :], s, float("-inf"))
        if WRITE_LOGITS:
            lp = logits + (b * HQ + hq0 + hh)[:, None] * seq + pos[None, :]
            tl.store(lp, s, mask=hmask[:, None] & in_range[None, :])
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_use[:, None])
        alpha = tl.exp(m_i - m_use)
        vt = tl.load(
            v_base + pos[:, None] * sv_s + d[None, :] * sv_d,
            mask=ok[:, None] & dmask[None, :],
            other=0.0,
        )
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt, input_precision=PREC)
        m_i = m_new
    prow = (b * HQ + hq0 + hh).to(tl.int64) * n_split + split
    tl.store(m_part + prow, m_i, mask=hmask)
    tl.store(l_part + prow, l_i, mask=hmask)
    tl.store(o_part + prow[:, None] * D + d[None, :], acc, mask=hmask[:, None] & dmask[None, :])


@triton.jit
def _decode_combine_kernel(
    m_part,
    l_part,
    o_part,
    out,
    n_split,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    sp = tl.arange(0, BLOCK_S)
    smask = sp < n_split
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    m = tl.load(m_part + row * n_split + sp, mask=smask, other=float("-inf"))
    l_s = tl.load(l_part + row * n_split + sp, mask=smask, other=0.0)
    o = tl.load(
        o_part + (row * n_split + sp)[:, None] * D + d[None, :],
        mask=smask[:, None] & dmask[None, :],
        other=0.0,
    )
    m_max = tl.max(m, 0)
    m_use = tl.where(m_max == float("-inf"), 0.0, m_max)
    w = tl.exp(m - m_use)
    den = tl.sum(w * l_s, 0)
    num = tl.sum(w[:, None] * o, 0)
    res = tl.where(den > 0, num / tl.where(den > 0, den, 1.0), 0.0)
    tl.store(out + row * D + d, res.to(out.dtype.element_ty), mask=dmask)


def _num_splits(programs: int, n_pos: int, block_n: int, device: torch.device) -> int:
    """Splits so that about two waves of programs fill the GPU (at least one block each)."""
    if device.type == "cuda":
        target = 2 * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        target = 4
    blocks = triton.cdiv(n_pos, block_n)
    return max(1, min(blocks, math.ceil(target / max(programs, 1))))


def decode_attention_triton(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor | None,
    scale: float,
    valid_len: torch.Tensor | None,
    *,
    want_logits: bool,
    num_splits: int | None = None,
    block_n: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Decode attention over the whole cache (``indices=None``) or gathered positions.

    Returns ``(out [B, HQ, D], logits [B, HQ, S] fp32 or None)``; ``logits`` (only for the
    whole cache, with ``want_logits``) holds ``q . k * scale`` and ``-inf`` past
    ``valid_len``.
    """
    b, hq, d = q.shape
    s, hkv = k_cache.shape[1], k_cache.shape[2]
    group = hq // hkv
    sparse = indices is not None
    per_head = indices is not None and indices.shape[1] == hq and group > 1
    n_pos = indices.shape[2] if indices is not None else s
    heads = 1 if per_head else group
    programs = b * (hq if per_head else hkv)
    if block_n is None:
        block_n = 64 if d <= 128 else 32
    n_split = num_splits or _num_splits(programs, n_pos, block_n, q.device)
    split_len = triton.cdiv(triton.cdiv(n_pos, n_split), block_n) * block_n
    n_split = triton.cdiv(n_pos, split_len)
    dev = q.device
    m_part = torch.empty(b * hq, n_split, dtype=torch.float32, device=dev)
    l_part = torch.empty_like(m_part)
    o_part = torch.empty(b * hq, n_split, d, dtype=torch.float32, device=dev)
    logits = torch.empty(b, hq, s, dtype=torch.float32, device=dev) if want_logits else None
    idx = indices if indices is not None else m_part
    si = indices.stride() if indices is not None else (0, 0, 0)
    prec = dot_precision(q.dtype)
    _decode_partial_kernel[(programs, n_split)](
        q, k_cache, v_cache, idx, valid_len if valid_len is not None else m_part,
        logits if logits is not None else m_part, m_part, l_part, o_part,
        *q.stride(), *k_cache.stride(), *v_cache.stride(), *si,
        n_pos, s, split_len, n_split, scale,
        HQ=hq, GROUP=group, HEADS=heads, PER_HEAD=per_head, SPARSE=sparse,
        HAS_VALID=valid_len is not None and not sparse, WRITE_LOGITS=want_logits and not sparse,
        D=d, BLOCK_D=max(16, triton.next_power_of_2(d)),
        BLOCK_H=max(16, triton.next_power_of_2(heads)), BLOCK_N=block_n, PREC=prec,
    )  # fmt: skip
    out = torch.empty(b, hq, d, dtype=q.dtype, device=dev)
    _decode_combine_kernel[(b * hq,)](
        m_part, l_part, o_part, out, n_split,
        D=d, BLOCK_D=max(16, triton.next_power_of_2(d)),
        BLOCK_S=max(2, triton.next_power_of_2(n_split)),
    )  # fmt: skip
    return out, logits
