"""Stage 1 of DSSA: compressed keys, group-summed scores, max-pooling, top-k blocks.

Three block scores (``DSSAConfig.block_score``): ``"mean"`` (the paper's: attention to
mean-pooled keys, max-pooled onto blocks), ``"meanvar"`` (the same with a per-channel
variance term, ``log E[exp(logit)]`` of a span under independent Gaussian channels) and
``"bound"`` (per-channel key bounds of each block, an upper bound of every logit in it).
The last two are training-free options.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from lc_attention.dssa.config import DSSAConfig
from lc_kernels import mean_pool_compress, num_compressed
from lc_kernels.block_select import topk_blocks_from_scores
from lc_kernels.compressed_attention import group_block_scores, num_query_groups


def summary_span(config: DSSAConfig) -> tuple[int, int]:
    """``(span, step)`` in tokens of one compressed key: ``(kernel_size, stride)`` for
    ``block_score="mean"``, ``(block_size, block_size)`` (one per block) for ``"bound"``."""
    if config.block_score == "bound":
        return config.block_size, config.block_size
    return config.kernel_size, config.stride


def block_bounds(key: torch.Tensor, block_size: int) -> torch.Tensor:
    """Per-channel key bounds of every complete block: ``[B, S, H_kv, D] -> [B, C, H_kv, 2D]``.

    ``C = S // block_size``; the last dimension holds the maximum over the block's keys
    followed by the minimum.

    Example:
        >>> import torch
        >>> block_bounds(torch.arange(8.0).view(1, 8, 1, 1), 4).flatten().tolist()
        [3.0, 0.0, 7.0, 4.0]
    """
    b, s, h, d = key.shape
    c = s // block_size
    blocks = key[:, : c * block_size].view(b, c, block_size, h, d)
    return torch.cat([blocks.amax(2), blocks.amin(2)], -1)


def bound_logits(query: torch.Tensor, k_bnd: torch.Tensor, scale: float) -> torch.Tensor:
    """Upper bound of every attention logit in each block: ``[B, T, HQ, C]`` float32.

    ``scale * sum_d max(q_d * kmax_d, q_d * kmin_d) = scale * (relu(q) . kmax +
    min(q, 0) . kmin)`` for the query heads of each KV head; no logit ``scale * q . k``
    of a key in the block exceeds it (when ``scale >= 0``).

    Args:
        query: ``[B, T, HQ, D]`` queries.
        k_bnd: ``[B, C, H_kv, 2D]`` [block_bounds][lc_attention.dssa.selection.block_bounds].
        scale: softmax scale.

    Returns:
        ``[B, T, HQ, C]`` bounds (no causal masking).

    Example:
        >>> import torch
        >>> q = torch.tensor([1.0, -1.0]).view(1, 1, 1, 2)
        >>> k = torch.tensor([[2.0, 3.0], [0.0, 1.0]]).view(1, 2, 1, 2)  # logits -1, -1
        >>> bound_logits(q, block_bounds(k, 2), 1.0).flatten().tolist()
        [1.0]
    """
    b, t, hq, d = query.shape
    hkv = k_bnd.shape[2]
    qf = query.float().view(b, t, hkv, hq // hkv, d)
    qpm = torch.cat([qf.clamp(min=0), qf.clamp(max=0)], -1)
    out = torch.einsum("bthge,bche->bthgc", qpm, k_bnd.float()) * scale
    return out.reshape(b, t, hq, -1)


def compress_keys(key: torch.Tensor, config: DSSAConfig) -> torch.Tensor:
    """The keys' summary used to score blocks.

    ``block_score="mean"``: mean-pooled keys ``[B, C, H_kv, D]``, ``C = (S - l) // d +
    1``. ``"meanvar"``: the same spans' mean and per-channel variance ``[B, C, H_kv,
    2D]``. ``"bound"``: [block_bounds][lc_attention.dssa.selection.block_bounds]
    ``[B, S // block_size, H_kv, 2D]``.
    """
    if config.block_score == "bound":
        return block_bounds(key, config.block_size)
    mean = mean_pool_compress(key, config.kernel_size, config.stride)
    if config.block_score == "meanvar":
        sq = mean_pool_compress(key.float().square(), config.kernel_size, config.stride)
        var = (sq - mean.float().square()).clamp_min_(0).to(mean.dtype)
        return torch.cat([mean, var], -1)
    return mean


#: queries scored at a time on CPU: the logits of a chunk (``chunk * HQ * C`` floats)
#: should stay in the core's cache; on other devices fewer, larger launches win
CPU_CHUNK = 128
DEVICE_CHUNK = 1024


def _chunk_for(query: torch.Tensor, query_block: int) -> int:
    base = CPU_CHUNK if query.device.type == "cpu" else DEVICE_CHUNK
    return query_block * max(1, base // query_block)


def fused_backend(query: torch.Tensor, config: DSSAConfig) -> str | None:
    """Backend of ``lc_kernels``' fused stage 1 for these queries, or None for the chunked path.

    The fused Triton pass (log-sum-exp, then pooled group sums without writing the
    probabilities) serves the paper's ``block_score="mean"`` on CUDA; CPU, other
    devices and the other block scores use the chunked PyTorch path of this module.
    """
    if config.block_score == "mean" and query.device.type == "cuda":
        return "triton"
    return None


def _fused_scores(
    query: torch.Tensor,
    k_cmp: torch.Tensor,
    start: int,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
    query_block: int,
    backend: str,
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """Like ``_score_chunks`` through ``lc_kernels.compressed_attention.group_block_scores``.

    With ``query_block > 1`` one call covers all queries (``[B, NG, H_kv, NB]`` is small);
    per-query scores go ``DEVICE_CHUNK`` queries at a time to bound memory.
    """
    qb, t = query_block, query.shape[1]
    step = t if qb > 1 else DEVICE_CHUNK
    g0 = start // qb
    for a in range(0, t, step):
        e = min(t, a + step)
        sc = group_block_scores(
            query[:, a:e],
            k_cmp,
            start + a,
            kv_len,
            config.kernel_size,
            config.stride,
            config.block_size,
            qb,
            scale,
            backend=backend,
        )
        lo = (start + a) // qb - g0
        yield lo, lo + sc.shape[1], sc


def _first_position(positions: torch.Tensor | int) -> int:
    """Key position of the first query (``positions`` are consecutive)."""
    return positions if isinstance(positions, int) else int(positions[0])


def _segments(p_lo: int, p_hi: int, query_block: int) -> list[tuple[int, int]]:
    """Query index ranges, relative to ``p_lo``, of the groups met by ``[p_lo, p_hi]``."""
    out, a = [], p_lo
    while a <= p_hi:
        e = min(p_hi + 1, (a // query_block + 1) * query_block)
        out.append((a - p_lo, e - p_lo))
        a = e
    return out


def _chunk_cuts(
    start: int, t: int, chunk: int, query_block: int
) -> Iterator[tuple[int, int, int, int, int, int]]:
    """``(a, e, p_lo, p_hi, lo, hi)`` for the chunks of queries ``[a, e)`` cut at positions
    that are multiples of ``chunk``: their key positions ``p_lo .. p_hi`` and the query
    groups ``[lo, hi)`` they meet (relative to the group of ``start``)."""
    g0 = start // query_block
    first = (-start) % chunk or chunk
    for a, e in itertools.pairwise([0, *range(first, t, chunk), t]):
        p_lo, p_hi = start + a, start + e - 1
        yield a, e, p_lo, p_hi, p_lo // query_block - g0, p_hi // query_block - g0 + 1


def _group_sum(
    sc: torch.Tensor, g: int, rows: int, qb: int, p_lo: int, p_hi: int, dst: torch.Tensor
) -> None:
    """Sum ``sc [B, H_kv, n * G, cv]`` (rows query by query, heads inside) over the ``G``
    heads and the queries of each group into ``dst [B, H_kv, rows, cv]``."""
    b, hkv, ng, cv = sc.shape
    n = ng // g
    if qb == 1:  # summed over the group's heads
        torch.sum(sc.view(b, hkv, n, g, cv), 3, out=dst)
    elif n == rows * qb:  # whole groups: one reduction over each group's rows
        torch.sum(sc.view(b, hkv, rows, qb * g, cv), 3, out=dst)
    else:  # a group cut by the ends of the queries
        for j, (i0, i1) in enumerate(_segments(p_lo, p_hi, qb)):
            torch.sum(sc[:, :, i0 * g : i1 * g], 2, out=dst[:, :, j])


def _score_chunks(
    query: torch.Tensor,
    k_cmp: torch.Tensor,
    start: int,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
    chunk: int,
    query_block: int = 1,
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """Yield ``(lo, hi, scores [B, hi - lo, H_kv, NB])`` for chunks of queries.

    Query ``t`` sits at key position ``start + t``. Queries form position-aligned groups
    of ``query_block`` (group ``i`` holds positions ``[(start // query_block + i) *
    query_block, ...)``); ``lo, hi`` index groups, and a group's score is the sum over its
    queries and over the query heads of each KV head of the compressed-key softmax,
    max-pooled onto blocks. With ``query_block = 1`` a group is one query.

    Chunks are cut at positions that are multiples of ``chunk`` (itself a multiple of
    ``query_block``). Each chunk multiplies only by the compressed keys its last query
    can see, masks only the spans some of its queries cannot see yet, takes the softmax
    in place and sums the rows of each group in one reduction (rows are ordered query
    by query, heads inside, so a group's rows are contiguous). Every bound is computed
    from Python integers: nothing is read back from the device.
    """
    b, t, hq, d = query.shape
    c, hkv = k_cmp.shape[1], k_cmp.shape[2]
    g = hq // hkv
    bs, st, ks = config.block_size, config.stride, config.kernel_size
    qb = query_block
    dev = query.device
    nb = -(-kv_len // bs)
    r = bs // st
    pad_left = -(-ks // st) - 1  # compressed tokens before block j*r that still overlap it
    width = pad_left + nb * r  # >= pad_left + C: a span ending before S starts in a block
    ends = torch.arange(c, device=dev) * st + ks - 1
    meanvar = config.block_score == "meanvar"
    # [B, H_kv, C, D]: rows of D contiguous floats (a cheap copy, also for one decode
    # query); the scale goes on the queries
    kf = k_cmp.float().permute(0, 2, 1, 3).contiguous()
    m = min(chunk, t)
    logits = torch.empty(b * hkv * m * g * max(c, 1), device=dev)
    # rows first, so that each chunk's rows are one contiguous [rows * B * H_kv, width]
    # table for the max-pool
    pooled = torch.zeros(-(-m // qb) + 1, b, hkv, width, device=dev)
    filled = 0
    for a, e, p_lo, p_hi, lo, hi in _chunk_cuts(start, t, chunk, qb):
        n, rows = e - a, hi - lo
        cv = min(c, max(0, (p_hi - ks + 1) // st + 1))  # spans visible to the last query
        if cv == 0:
            yield lo, hi, torch.zeros(b, rows, hkv, nb, device=dev)
            continue
        c_all = min(cv, max(0, (p_lo - ks + 1) // st + 1))  # spans every query sees
        qf = query[:, a:e].float().view(b, n, hkv, g, d).transpose(1, 2).reshape(b, hkv, n * g, d)
        qf = qf * scale
        if meanvar:  # [scale * q, scale^2 q^2 / 2] . [mean, var]: the Gaussian log-moment
            qf = torch.cat([qf, qf.square().mul_(0.5)], -1)
        sc = logits[: b * hkv * n * g * cv].view(b, hkv, n * g, cv)
        torch.matmul(qf, kf[:, :, :cv].transpose(-1, -2), out=sc)
        if c_all < cv:
            qpos = torch.arange(p_lo, p_hi + 1, device=dev)
            hidden = ends[None, c_all:cv] > qpos[:, None]  # [n, cv - c_all]
            sc.view(b, hkv, n, g, cv)[..., c_all:cv].masked_fill_(hidden[:, None], float("-inf"))
        torch.ops.aten._softmax.out(sc, -1, False, out=sc)  # row by row: safe in place
        if p_lo < ks - 1:  # queries that see no compressed key yet: 0, not NaN
            sc.nan_to_num_(nan=0.0)
        view = pooled[:rows]
        if filled > cv:  # a chunk seeing fewer spans than the last one: clear the rest
            view[..., pad_left + cv :].zero_()
        dst = view[..., pad_left : pad_left + cv].permute(1, 2, 0, 3)  # [B, H_kv, rows, cv]
        _group_sum(sc, g, rows, qb, p_lo, p_hi, dst)
        filled = cv
        # block j: the max over spans j * r - pad_left .. j * r + r - 1 (max_pool1d reads
        # contiguous rows several times faster than an amax over unfolded windows)
        win = F.max_pool1d(view.view(-1, 1, width), r + pad_left, r)
        yield lo, hi, win.view(rows, b, hkv, nb).transpose(0, 1)


def _bound_chunks(
    query: torch.Tensor,
    k_bnd: torch.Tensor,
    start: int,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
    chunk: int,
    query_block: int = 1,
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """Like ``_score_chunks`` for ``block_score="bound"``: yields ``(lo, hi, scores)``.

    The upper-bound logit of block ``j`` for query ``q`` is ``scale * (relu(q) . kmax_j
    + min(q, 0) . kmin_j)`` (one product with the concatenated bounds). A query at
    position ``p`` sees the blocks that end at or before ``p``; the softmax over them is
    summed over the query heads of each KV head and over the queries of each group.
    """
    b, t, hq, d = query.shape
    c, hkv = k_bnd.shape[1], k_bnd.shape[2]
    g = hq // hkv
    bs, qb, dev = config.block_size, query_block, query.device
    nb = -(-kv_len // bs)
    kf = (k_bnd.float() * scale).permute(0, 2, 3, 1)  # [B, H_kv, 2D, C]
    for a, e, p_lo, p_hi, lo, hi in _chunk_cuts(start, t, chunk, qb):
        n, rows = e - a, hi - lo
        out = torch.zeros(b, rows, hkv, nb, device=dev)
        cv = min(c, (p_hi + 1) // bs)  # blocks complete for the last query
        if cv == 0:
            yield lo, hi, out
            continue
        qf = query[:, a:e].float().view(b, n, hkv, g, d).transpose(1, 2).reshape(b, hkv, n * g, d)
        sc = torch.matmul(torch.cat([qf.clamp(min=0), qf.clamp(max=0)], -1), kf[..., :cv])
        c_all = min(cv, (p_lo + 1) // bs)  # blocks complete for every query
        if c_all < cv:
            qpos = torch.arange(p_lo, p_hi + 1, device=dev)
            ends = torch.arange(c_all, cv, device=dev) * bs + bs - 1
            hidden = ends[None, :] > qpos[:, None]  # [n, cv - c_all]
            sc.view(b, hkv, n, g, cv)[..., c_all:cv].masked_fill_(hidden[:, None], float("-inf"))
        sc = torch.softmax(sc, -1)
        if p_lo < bs - 1:  # queries that see no complete block yet: 0, not NaN
            sc = sc.nan_to_num(nan=0.0)
        _group_sum(sc, g, rows, qb, p_lo, p_hi, out[..., :cv].permute(0, 2, 1, 3))
        yield lo, hi, out


def _chunks(
    query: torch.Tensor,
    k_cmp: torch.Tensor,
    start: int,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
    chunk: int,
    query_block: int = 1,
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """The score chunks of ``config.block_score`` (fused on CUDA, see ``fused_backend``)."""
    backend = fused_backend(query, config)
    if backend is not None:
        return _fused_scores(query, k_cmp, start, kv_len, config, scale, query_block, backend)
    fn = _bound_chunks if config.block_score == "bound" else _score_chunks
    return fn(query, k_cmp, start, kv_len, config, scale, chunk, query_block)


@torch.no_grad()
def block_scores(
    query: torch.Tensor,
    k_cmp: torch.Tensor,
    positions: torch.Tensor | int,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
    chunk: int = CPU_CHUNK,
) -> torch.Tensor:
    """Importance of every key block for every query, shared by a GQA group.

    For query ``t`` at position ``p_t`` the softmax attention to the compressed keys
    whose span ends at or before ``p_t`` is summed over the ``G`` query heads of each
    KV head, then max-pooled onto the selection blocks: block ``j`` takes the largest
    score among the compressed spans that overlap it (with l = 32, d = 16, block 64:
    a window of 5 compressed tokens with step 4, as in InfLLM-v2).

    Args:
        query: ``[B, T, HQ, D]`` queries.
        k_cmp: ``[B, C, H_kv, D]`` compressed keys (``[B, C, H_kv, 2D]`` block bounds
            with ``block_score="bound"``), from
            [compress_keys][lc_attention.dssa.selection.compress_keys].
        positions: ``[T]`` consecutive int64 key positions of the queries, or the first
            of them as an int (a tensor's first entry is read once).
        kv_len: number of keys S.
        config: DSSA config (kernel, stride, block size).
        scale: softmax scale.
        chunk: queries scored at a time (bounds memory to ``chunk * HQ * C`` floats).

    Returns:
        ``[B, T, H_kv, NB]`` float32 scores, ``NB = ceil(S / block_size)``.
    """
    b, t = query.shape[:2]
    nb = -(-kv_len // config.block_size)
    out = torch.zeros(b, t, k_cmp.shape[2], nb, device=query.device, dtype=torch.float32)
    start = _first_position(positions)
    for a, e, sc in _chunks(query, k_cmp, start, kv_len, config, scale, chunk):
        out[:, a:e] = sc
    return out


def query_groups(
    positions: torch.Tensor | int, query_block: int, t: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Position-aligned query groups that share one selection.

    Args:
        positions: ``[T]`` increasing, consecutive key positions of the queries, or the
            first of them as an int (then ``t`` gives ``T``).
        query_block: positions per group (groups are ``[m * query_block, (m + 1) *
            query_block)``; a group cut by the ends of ``positions`` keeps the queries
            present).
        t: number of queries when ``positions`` is an int.

    Returns:
        ``(group [T] int64 group index of each query, last [NG] int64 largest position
        in each group)``, computed without reading device values.
    """
    if isinstance(positions, int):
        if t is None:
            raise ValueError("query_groups: give t when positions is an int")
        start, dev = positions, None
    else:
        start, t, dev = _first_position(positions), positions.shape[0], positions.device
    g0 = start // query_block
    ng = num_query_groups(start, t, query_block)
    gid = torch.arange(start, start + t, device=dev) // query_block - g0
    last = ((torch.arange(ng, device=dev) + g0 + 1) * query_block - 1).clamp_max_(start + t - 1)
    return gid, last


@torch.no_grad()
def select_group_blocks(
    query: torch.Tensor,
    k_cmp: torch.Tensor,
    start: int,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
) -> torch.Tensor:
    """Block ids of each position-aligned query group (``config.query_block``).

    Like [select_blocks][lc_attention.dssa.selection.select_blocks] but one row per
    group of ``query_block`` positions (one per query when it is 1), with the first
    query at key position ``start``; nothing is read back from the device.

    Args:
        query: ``[B, T, HQ, D]`` queries at key positions ``start .. start + T - 1``.
        k_cmp: [compress_keys][lc_attention.dssa.selection.compress_keys] of the
            ``kv_len`` keys.
        start: key position of the first query.
        kv_len: number of keys S.
        config: DSSA config (``query_block`` sets the groups).
        scale: softmax scale.

    Returns:
        ``[B, NG, H_kv, K]`` int32 block ids, ``-1`` in slots that cannot be filled
        or lie beyond a group's budget, best first;
        ``NG = (start + T - 1) // query_block - start // query_block + 1``; ``K =
        topk``, or with ``topk_fraction`` the budget of the last group.

    Example:
        >>> import torch
        >>> cfg = DSSAConfig.small(query_block=64)
        >>> q = torch.randn(1, 100, 6, 16); k = torch.randn(1, 2048, 2, 16)
        >>> select_group_blocks(q, compress_keys(k, cfg), 1948, 2048, cfg, 0.25).shape
        torch.Size([1, 2, 2, 16])
    """
    qb = config.query_block
    t = query.shape[1]
    top = config.budget((start + t - 1) // config.block_size + 1)  # the last query's
    args = (config.block_size, top, config.init_blocks, config.local_blocks)
    chunk = _chunk_for(query, qb)
    chunks = _chunks(query, k_cmp, start, kv_len, config, scale, chunk, qb)
    _, last = query_groups(start, qb, t)
    last = last.to(query.device)
    if qb == 1:  # one row per query: top-k chunk by chunk bounds the memory
        parts = [topk_blocks_from_scores(sc, *args, last[a:e]) for a, e, sc in chunks]
        idx = torch.cat(parts, 1)
    else:
        b, ng = query.shape[0], last.shape[0]
        nb = -(-kv_len // config.block_size)
        scores = torch.empty(b, ng, k_cmp.shape[2], nb, device=query.device)
        for a, e, sc in chunks:
            scores[:, a:e] = sc
        idx = topk_blocks_from_scores(scores, *args, last)
    if config.topk_fraction:  # slots are best first: keep each group's budget
        limits = group_budgets(start, t, config).to(idx.device)
        idx.masked_fill_(torch.arange(top, device=idx.device) >= limits.view(1, -1, 1, 1), -1)
    return idx


def group_budgets(start: int, t: int, config: DSSAConfig) -> torch.Tensor:
    """``[NG]`` int64 (CPU) blocks each query group attends to (``DSSAConfig.budget``).

    A group's budget is that of its last position ``p``, which sees ``p // block_size +
    1`` blocks; queries at key positions ``start .. start + t - 1``.

    Example:
        >>> group_budgets(0, 8192, DSSAConfig.small(topk_fraction=0.25))[[0, -1]].tolist()
        [16, 32]
    """
    _, last = query_groups(start, config.query_block, t)
    seen = last // config.block_size + 1
    lo = int(seen[0])
    table = torch.tensor([config.budget(n) for n in range(lo, int(seen[-1]) + 1)])
    return table[seen - lo]


def first_full_group(start: int, t: int, config: DSSAConfig) -> int:
    """Index of the first query group whose every slot holds a block (or ``NG``).

    A group fills all ``top`` slots of the call (the last group's budget) once it sees
    at least ``top`` blocks and its own budget is ``top``; the later groups too.

    Example:
        >>> first_full_group(0, 4096, DSSAConfig.small(query_block=64))
        15
    """
    _, last = query_groups(start, config.query_block, t)
    limits = group_budgets(start, t, config)
    full = (limits >= limits[-1]) & (last // config.block_size + 1 >= limits[-1])
    return int(torch.argmax(full.int())) if bool(full.any()) else int(full.shape[0])


@torch.no_grad()
def select_blocks(
    query: torch.Tensor,
    k_cmp: torch.Tensor,
    positions: torch.Tensor | int,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
) -> torch.Tensor:
    """Block ids each query attends to in sparse mode.

    The first ``init_blocks`` blocks and the ``local_blocks`` most recent ones (the
    query's own block and those just before it) are always taken, future blocks never;
    the remaining slots of the ``topk`` (``DSSAConfig.budget`` with ``topk_fraction``)
    go to the best max-pooled scores. With
    ``config.query_block > 1`` the queries of each position-aligned group of
    ``query_block`` sum their group-summed compressed-key scores, which are then
    max-pooled onto blocks, and share one selection.

    Args:
        query: ``[B, T, HQ, D]`` queries.
        k_cmp: [compress_keys][lc_attention.dssa.selection.compress_keys] of the
            ``kv_len`` keys.
        positions: ``[T]`` key positions of the queries (consecutive), or the first of
            them as an int (a tensor's first entry is read once).
        kv_len: number of keys S.
        config: DSSA config.
        scale: softmax scale.

    Returns:
        ``[B, T, H_kv, K]`` int32 block ids, ``-1`` in slots that cannot be filled
        (``K`` as in [select_group_blocks][lc_attention.dssa.selection.select_group_blocks]).

    Example:
        >>> import torch
        >>> cfg = DSSAConfig.small()
        >>> q = torch.randn(1, 4, 6, 16); k = torch.randn(1, 2048, 2, 16)
        >>> pos = torch.arange(2044, 2048)
        >>> idx = select_blocks(q, compress_keys(k, cfg), pos, 2048, cfg, 0.25)
        >>> idx.shape, int(idx.max())
        (torch.Size([1, 4, 2, 16]), 31)
    """
    start = _first_position(positions)
    idx = select_group_blocks(query, k_cmp, start, kv_len, config, scale)
    if config.query_block == 1:
        return idx
    gid, _ = query_groups(start, config.query_block, query.shape[1])
    return idx.index_select(1, gid.to(idx.device))


def num_compressed_keys(kv_len: int, config: DSSAConfig) -> int:
    """Number of compressed keys (block bounds with ``block_score="bound"``) of ``kv_len`` keys."""
    return num_compressed(kv_len, *summary_span(config))
