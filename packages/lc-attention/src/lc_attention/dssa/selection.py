"""Stage 1 of DSSA: compressed keys, group-summed scores, max-pooling, top-k blocks."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import torch

from lc_attention.dssa.config import DSSAConfig
from lc_kernels import mean_pool_compress, num_compressed
from lc_kernels.compressed_attention import topk_blocks_from_scores


def compress_keys(key: torch.Tensor, config: DSSAConfig) -> torch.Tensor:
    """Mean-pooled keys: ``[B, S, H_kv, D] -> [B, C, H_kv, D]``, ``C = (S - l) // d + 1``."""
    return mean_pool_compress(key, config.kernel_size, config.stride)


def _score_chunks(
    query: torch.Tensor,
    k_cmp: torch.Tensor,
    positions: torch.Tensor,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
    chunk: int,
    groups: torch.Tensor | None = None,
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """Yield ``(start, end, scores [B, end - start, H_kv, NB])`` for query chunks.

    Chunks are cut at positions that are multiples of ``chunk``. Each multiplies only
    by the compressed keys its last query can see, masks only the spans that some of
    its queries cannot see yet, and works in buffers reused across chunks (large fresh
    allocations dominate on CPU). With ``groups`` (``[T]`` group index of each query,
    groups aligned to ``chunk``) the group-summed scores of the queries of each group
    are summed before the max-pooling, and ``start, end`` index groups.
    """
    b, t, hq, d = query.shape
    c, hkv = k_cmp.shape[1], k_cmp.shape[2]
    g = hq // hkv
    bs, st, ks = config.block_size, config.stride, config.kernel_size
    nb = -(-kv_len // bs)
    r = bs // st
    pad_left = -(-ks // st) - 1  # compressed tokens before block j*r that still overlap it
    width = pad_left + nb * r  # >= pad_left + C: a span ending before S starts in a block
    ends = torch.arange(c, device=query.device) * st + ks - 1
    kf = (k_cmp.float() * scale).permute(0, 2, 3, 1).contiguous()  # [B, H_kv, D, C]
    pos = positions.to(query.device).long()
    m = min(chunk, t)
    logits = torch.empty(b * hkv * g * m * max(c, 1), device=query.device)
    probs = torch.empty_like(logits)
    pooled = torch.zeros(b, hkv, m, width, device=query.device)
    filled = 0
    first = (-int(pos[0])) % chunk or chunk
    cuts = [0, *range(first, t, chunk), t]
    for a, e in itertools.pairwise(cuts):
        n = e - a
        p_lo, p_hi = int(pos[a:e].min()), int(pos[a:e].max())
        cv = min(c, max(0, (p_hi - ks + 1) // st + 1))  # spans visible to the last query
        rows, lo, hi = n, a, e
        if groups is not None:
            lo, hi = int(groups[a]), int(groups[e - 1]) + 1
            rows = hi - lo
        if cv == 0:
            yield lo, hi, torch.zeros(b, rows, hkv, nb, device=query.device)
            continue
        c_all = min(cv, max(0, (p_lo - ks + 1) // st + 1))  # spans every query sees
        qf = query[:, a:e].float()
        qf = qf.view(b, n, hkv, g, d).permute(0, 2, 3, 1, 4).reshape(b, hkv, g * n, d)
        sc = logits[: b * hkv * g * n * cv].view(b, hkv, g * n, cv)
        torch.matmul(qf, kf[..., :cv], out=sc)
        sc = sc.view(b, hkv, g, n, cv)
        if c_all < cv:
            hidden = ends[None, c_all:cv] > pos[a:e, None]  # [n, cv - c_all]
            sc[..., c_all:cv].masked_fill_(hidden, float("-inf"))
        pr = probs[: sc.numel()].view(sc.shape)
        torch.ops.aten._softmax.out(sc, -1, False, out=pr)
        if p_lo < ks - 1:  # queries that see no compressed key yet: 0, not NaN
            pr.nan_to_num_(nan=0.0)
        view = pooled[:, :, :rows]
        if filled > cv:  # a chunk seeing fewer spans than the last one: clear the rest
            view[..., pad_left + cv :].zero_()
        dst = view[..., pad_left : pad_left + cv]
        if groups is None:
            torch.sum(pr, 2, out=dst)  # summed over the query heads of the group
        else:
            dst.zero_().index_add_(2, groups[a:e] - lo, pr.sum(2))
        filled = cv
        win = view.unfold(-1, r + pad_left, r)  # [B, H_kv, rows, NB, r + pad_left]
        yield lo, hi, win.amax(-1).permute(0, 2, 1, 3)


@torch.no_grad()
def block_scores(
    query: torch.Tensor,
    k_cmp: torch.Tensor,
    positions: torch.Tensor,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
    chunk: int = 512,
) -> torch.Tensor:
    """Importance of every key block for every query, shared by a GQA group.

    For query ``t`` at position ``p_t`` the softmax attention to the compressed keys
    whose span ends at or before ``p_t`` is summed over the ``G`` query heads of each
    KV head, then max-pooled onto the selection blocks: block ``j`` takes the largest
    score among the compressed spans that overlap it (with l = 32, d = 16, block 64:
    a window of 5 compressed tokens with step 4, as in InfLLM-v2).

    Args:
        query: ``[B, T, HQ, D]`` queries.
        k_cmp: ``[B, C, H_kv, D]`` compressed keys.
        positions: ``[T]`` int64 key positions of the queries.
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
    for a, e, sc in _score_chunks(query, k_cmp, positions, kv_len, config, scale, chunk):
        out[:, a:e] = sc
    return out


def query_groups(positions: torch.Tensor, query_block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Position-aligned query groups that share one selection.

    Args:
        positions: ``[T]`` increasing, consecutive key positions of the queries.
        query_block: positions per group (groups are ``[m * query_block, (m + 1) *
            query_block)``; a group cut by the ends of ``positions`` keeps the queries
            present).

    Returns:
        ``(group [T] int64 group index of each query, last [NG] int64 largest position
        in each group)``.
    """
    pos = positions.long()
    gid = pos // query_block
    gid = gid - gid[0]
    ng = int(gid[-1]) + 1
    last = torch.full((ng,), -1, dtype=torch.long, device=pos.device)
    last.scatter_reduce_(0, gid, pos, reduce="amax")
    return gid, last


@torch.no_grad()
def select_blocks(
    query: torch.Tensor,
    k_cmp: torch.Tensor,
    positions: torch.Tensor,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
) -> torch.Tensor:
    """Block ids each query attends to in sparse mode.

    The first ``init_blocks`` blocks and the ``local_blocks`` most recent ones (the
    query's own block and those just before it) are always taken, future blocks never;
    the remaining slots of the ``topk`` go to the best max-pooled scores. With
    ``config.query_block > 1`` the queries of each position-aligned group of
    ``query_block`` sum their group-summed compressed-key scores, which are then
    max-pooled onto blocks, and share one selection.

    Args:
        query: ``[B, T, HQ, D]`` queries.
        k_cmp: ``[B, C, H_kv, D]`` compressed keys of the ``kv_len`` keys.
        positions: ``[T]`` key positions of the queries (consecutive).
        kv_len: number of keys S.
        config: DSSA config.
        scale: softmax scale.

    Returns:
        ``[B, T, H_kv, topk]`` int32 block ids, ``-1`` in slots that cannot be filled.

    Example:
        >>> import torch
        >>> cfg = DSSAConfig.small()
        >>> q = torch.randn(1, 4, 6, 16); k = torch.randn(1, 2048, 2, 16)
        >>> pos = torch.arange(2044, 2048)
        >>> idx = select_blocks(q, compress_keys(k, cfg), pos, 2048, cfg, 0.25)
        >>> idx.shape, int(idx.max())
        (torch.Size([1, 4, 2, 16]), 31)
    """
    args = (config.block_size, config.topk, config.init_blocks, config.local_blocks)
    if config.query_block == 1:
        chunks = _score_chunks(query, k_cmp, positions, kv_len, config, scale, 512)
        parts = [topk_blocks_from_scores(sc, *args, positions[a:e]) for a, e, sc in chunks]
        return torch.cat(parts, 1)
    gid, last = query_groups(positions, config.query_block)
    chunk = config.query_block * max(1, 512 // config.query_block)
    chunks = _score_chunks(query, k_cmp, positions, kv_len, config, scale, chunk, gid)
    parts = [topk_blocks_from_scores(sc, *args, last[a:e]) for a, e, sc in chunks]
    return torch.cat(parts, 1)[:, gid]


def num_compressed_keys(kv_len: int, config: DSSAConfig) -> int:
    """Number of compressed keys of ``kv_len`` keys."""
    return num_compressed(kv_len, config.kernel_size, config.stride)
