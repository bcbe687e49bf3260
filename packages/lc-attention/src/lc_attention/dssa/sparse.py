"""DSSA's second stage in PyTorch: each query over exactly its selected key blocks.

The PyTorch path of the sparse stage (the other is lc-kernels' Triton
``selected_attention``). Each ``block_size``-aligned tile of queries attends once, per
KV head, to the blocks every query of the tile is forced to take (initial, local and
own block), causal inside the own block; every other selected block of a query is one
(query, block) pair, the pairs are grouped by block and each block attends to the
queries that chose it (as Flash Sparse Attention loops over key blocks). The partial
results are merged by their log-sum-exp. The work is that of the selection itself,
``O(T * K * block_size)``. It serves prefill, chunked prefill and decode, per-query and
shared selections (``DSSAConfig.query_block``), per-position budgets (``-1`` slots),
padding masks and gradients.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from lc_kernels.block_select import forced_block_ids
from lc_kernels.compressed_attention import num_query_groups

# gathered key and value entries (tiles x heads x keys x head_dim) per chunk of tiles
_GROUP_CHUNK_ELEMS = 1 << 21
# query rows (queries x heads x head_dim) per batch of key-block chunks: bounds memory
_PAIR_CHUNK_ELEMS = 1 << 23


BlockGather = Callable[[torch.Tensor], torch.Tensor]


def _block_gather(x: torch.Tensor, block_size: int) -> BlockGather:
    """A function ``rows [N] -> [N, block_size, D]`` reading key blocks of ``x [B, S, H, D]``.

    Row ``(b * H + h) * NB + j`` is block ``j`` of head ``h`` (``NB = ceil(S /
    block_size)``); positions past ``S`` repeat the last key (callers mask them). One
    ``index_select`` of whole ``D``-rows from a ``[rows, D]`` view of ``x``:
    transformers' KV cache is ``[B, H, S, D]`` in memory (``x`` is its transpose), other
    callers pass a contiguous ``[B, S, H, D]``; anything else is copied once.
    """
    _, s, h, d = x.shape
    nb = -(-s // block_size)
    offs = torch.arange(block_size, device=x.device)
    if x.transpose(1, 2).is_contiguous():
        table = x.transpose(1, 2).reshape(-1, d)

        def token_rows(bh: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
            return bh * s + pos

    else:
        table = x.contiguous().view(-1, d)

        def token_rows(bh: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
            return ((bh // h) * s + pos) * h + bh % h

    def gather(rows: torch.Tensor) -> torch.Tensor:
        pos = ((rows % nb)[:, None] * block_size + offs).clamp_max_(s - 1)
        tok = token_rows((rows // nb)[:, None], pos)
        return table.index_select(0, tok.flatten()).view(-1, block_size, d)

    return gather


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention and the log-sum-exp of its logits, ``[N, 1, L, D]`` inputs.

    Args:
        q: ``[N, 1, L, D]`` queries.
        k: ``[N, 1, M, D]`` keys.
        v: ``[N, 1, M, D]`` values.
        scale: softmax scale.
        mask: optional additive float mask broadcastable to ``[N, 1, L, M]``; every row
            must allow at least one key.

    Returns:
        ``(out [N, 1, L, D] in q.dtype, lse [N, 1, L] float32)``. On CPU (float32,
        bfloat16, float16) without a gradient this is one pass of PyTorch's
        flash-attention kernel, which returns both; otherwise plain matrix products in
        float32 (float64 for float64), differentiable in ``q``, ``k`` and ``v``.
    """
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    fast = q.device.type == "cpu" and q.dtype in (torch.float32, torch.bfloat16, torch.float16)
    if fast and not grad:
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, attn_mask=mask, scale=scale
        )
        return out, lse.float()
    acc = torch.promote_types(q.dtype, torch.float32)
    logits = (q.to(acc) @ k.to(acc).transpose(-1, -2)) * scale
    if mask is not None:
        logits = logits + mask.to(acc)
    lse = torch.logsumexp(logits, -1)
    out = torch.exp(logits - lse[..., None]) @ v.to(acc)
    return out.to(q.dtype), lse.float()


def block_major_selected_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    idx: torch.Tensor,
    start: int,
    block_size: int,
    scale: float,
    init_blocks: int,
    local_blocks: int,
    chunk: int = 64,
    allowed_pad: torch.Tensor | None = None,
    query_block: int = 1,
) -> torch.Tensor:
    """Causal attention of every query over its own selected blocks, key block by key block.

    DSSA's PyTorch sparse stage. The blocks every query of a ``block_size``-aligned
    tile is forced to take (the first ``init_blocks``, the ``local_blocks`` most recent
    and its own block) are the same for the whole tile: one SDPA per (tile, KV head) over
    them, causal inside the own block. Every other selected block ``j`` of query ``t``
    (strictly before ``t``'s block, so fully visible) is one (query, block) pair: the
    pairs are sorted by block, the queries of each block cut into chunks of ``chunk``,
    and each chunk attends to its one block (as Flash Sparse Attention loops over key
    blocks and gathers the queries that chose them). The partial results are merged with
    their log-sum-exp. The work is that of the selection itself, ``O(T * K *
    block_size)``, with no union of neighbouring queries' blocks. Nothing is read back
    from a device other than the CPU (no synchronisation on a GPU). Differentiable in ``q``, ``k`` and ``v`` (the ids are data): with a
    gradient the partial results are kept and merged once at the end instead of
    folded into running sums.

    Args:
        q: ``[B, T, HQ, D]`` queries; query ``t`` sits at key position ``start + t``.
        k: ``[B, S, H_kv, D]`` keys; ``HQ`` a multiple of ``H_kv``; ``start + T <= S``.
        v: ``[B, S, H_kv, D]`` values.
        idx: ``[B, T, H_kv, K]`` block ids per query (``-1`` = unused slot, duplicates
            count once, future blocks are ignored), or with ``query_block > 1`` one row
            per position-aligned group of ``query_block`` queries, ``[B, NG, H_kv, K]``.
            A forced block that a query did not select is masked out for that query.
        start: key position of the first query.
        block_size: tokens per key block.
        scale: softmax scale.
        init_blocks: leading blocks forced for every query.
        local_blocks: most recent blocks (own block included) forced for every query.
        chunk: queries per (key block, chunk) product.
        allowed_pad: optional ``[B, 1, T, S]`` bool mask (True = attend), combined with
            the selection (a padding mask).
        query_block: queries per row of ``idx`` (1: one row per query).

    Returns:
        ``[B, T, HQ, D]``; a query with no allowed key gets 0.

    Example:
        >>> import torch
        >>> q = torch.randn(1, 256, 4, 8); k = torch.randn(1, 256, 2, 8)
        >>> idx = torch.tensor([0, 1, 3, -1]).expand(1, 256, 2, 4)
        >>> block_major_selected_attention(q, k, k, idx, 0, 64, 0.35, 1, 1).shape
        torch.Size([1, 256, 4, 8])
    """
    b, t, hq, d = q.shape
    s, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    bs = block_size
    nb = -(-s // bs)
    dev = q.device
    if block_size % query_block:
        raise ValueError(
            f"query_block={query_block} (queries per group) must divide block_size={bs}"
        )
    if query_block > 1:  # one row per query
        g0 = start // query_block
        ng = num_query_groups(start, t, query_block)
        if idx.shape[:3] != (b, ng, hkv):
            raise ValueError(f"idx {tuple(idx.shape)}: expected [{b}, {ng}, {hkv}, K]")
        gid = torch.arange(start, start + t, device=idx.device) // query_block - g0
        idx = idx.index_select(1, gid)
    ids = idx.long().sort(-1).values
    ids[..., 1:].masked_fill_(ids[..., 1:] == ids[..., :-1], -1)  # duplicates count once
    own, f_ids, f_ok = _forced_slots(start, t, bs, init_blocks, local_blocks, dev)
    # per query: which forced slots it selected, and which selections are pairs
    q_tile = torch.arange(start % bs, start % bs + t, device=dev) // bs  # [T]
    f_q = torch.where(f_ok, f_ids, -2)[q_tile]  # [T, F]
    is_f = ids[..., :, None] == f_q[None, :, None, None, :]  # [B, T, H_kv, K, F]
    member = is_f.any(3)  # [B, T, H_kv, F]
    pair = (ids >= 0) & (ids < own[q_tile].view(1, t, 1, 1)) & ~is_f.any(4)
    del is_f
    kb, vb = _block_gather(k, bs), _block_gather(v, bs)
    row0 = (torch.arange(b, device=dev)[:, None] * hkv + torch.arange(hkv, device=dev)) * nb
    pad = None if allowed_pad is None else allowed_pad[:, 0]  # [B, T, S]
    o_f, lse_f = _forced_attention(
        q, kb, vb, bs, nb, row0, start, own, f_ids, f_ok, member, scale, pad
    )
    n_rows = b * t * hkv
    chunk = max(1, min(chunk, t))
    table, chunk_key = _pair_chunks(pair, ids, row0, n_rows, b * hkv * nb, chunk)
    q_rows = q.reshape(n_rows, g * d)
    pad_rows = None if pad is None else pad.reshape(b * t, s)
    koff = torch.arange(bs, device=dev)
    grad = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
    parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    if grad:  # kept, merged once at the end (no in-place running sums under autograd)
        rows_f = torch.arange(n_rows, device=dev)
        parts.append((rows_f, o_f.reshape(n_rows, g, d).float(), lse_f.reshape(n_rows, g)))
    else:
        # running state per (batch, query, KV head) row: weighted sum, max log-mass,
        # weight, plus one more row, a sink for the padding slots of the chunks
        run_o = torch.zeros(n_rows + 1, g, d, device=dev)
        run_m = torch.full((n_rows + 1, g), -torch.inf, device=dev)
        run_o[:n_rows].view(b, t, hkv, g, d).copy_(o_f)  # one copy from the tiles' layout
        run_m[:n_rows].view(b, t, hkv, g).copy_(lse_f)
        run_w = torch.isfinite(run_m).float()
        run_o.mul_(run_w[..., None])
    per = max(1, _PAIR_CHUNK_ELEMS // (chunk * g * d))
    for a in range(0, table.shape[0], per):
        tgt = table[a : a + per].reshape(-1)
        keys = chunk_key[a : a + per]
        n = keys.shape[0]
        bias, has = None, None
        if pad_rows is not None:  # padding: the (query, key) pairs of each chunk
            qi = tgt.clamp_max(n_rows - 1) // hkv  # b * T + t
            kpos = ((keys % nb)[:, None] * bs + koff).clamp_max_(s - 1)  # [n, bs]
            ok = pad_rows[qi.view(n, chunk, 1), kpos[:, None, :]]  # [n, chunk, bs]
            has = ok.any(-1)  # [n, chunk]
            ok |= ~has[..., None]  # keep empty rows finite; their weight is 0 below
            bias = torch.zeros(ok.shape, dtype=q.dtype, device=dev).masked_fill_(~ok, -torch.inf)
            bias = bias.repeat_interleave(g, 1)[:, None]  # [n, 1, chunk * g, bs]
        o, lse = attention_with_lse(
            q_rows.index_select(0, tgt.clamp_max(n_rows - 1)).view(n, 1, chunk * g, d),
            kb(keys).view(n, 1, bs, d),
            vb(keys).view(n, 1, bs, d),
            scale,
            bias,
        )
        lse = lse.view(-1, g)
        if has is not None:
            lse = lse.masked_fill(~has.view(-1, 1), -torch.inf)
        if grad:
            parts.append((tgt, o.view(-1, g, d).float(), lse))
        else:
            _merge(run_o, run_m, run_w, tgt, o.view(-1, g, d).float(), lse)
    if grad:
        return _combine(parts, n_rows).view(b, t, hq, d).to(q.dtype)
    out = run_o[:n_rows] / run_w[:n_rows, :, None].clamp_min(torch.finfo(torch.float32).tiny)
    return out.view(b, t, hq, d).to(q.dtype)


def _combine(
    parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], n_rows: int
) -> torch.Tensor:
    """Merge partial attentions ``(rows [N], o [N, G, D], lse [N, G])`` by their
    log-sum-exp, out of place (differentiable): ``[n_rows, G, D]``, 0 for a row with no
    finite part. ``rows`` may repeat and hold ``n_rows`` (a sink, dropped)."""
    rows = torch.cat([p[0] for p in parts])
    o = torch.cat([p[1] for p in parts])
    lse = torch.cat([p[2] for p in parts])
    g, d = o.shape[1:]
    with torch.no_grad():
        m = torch.full((n_rows + 1, g), -torch.inf, device=o.device)
        m.scatter_reduce_(0, rows[:, None].expand_as(lse), lse, "amax")
        m = m.nan_to_num_(neginf=0.0)
    w = torch.exp(lse - m.index_select(0, rows))  # 0 where lse = -inf
    num = o.new_zeros(n_rows + 1, g, d).index_add(0, rows, o * w[..., None])
    den = w.new_zeros(n_rows + 1, g).index_add(0, rows, w)
    return num[:n_rows] / den[:n_rows, :, None].clamp_min(torch.finfo(torch.float32).tiny)


def _forced_slots(
    start: int, t: int, block_size: int, init_blocks: int, local_blocks: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The blocks forced for each ``block_size``-aligned tile of queries.

    Returns:
        ``(own [nT] block of each tile, ids [nT, F], ok [nT, F])``: lc-kernels'
        [forced_block_ids][lc_kernels.block_select.reference.forced_block_ids] of each
        tile's own block, the one forced-block rule of every method.
    """
    n_tiles = -(-(start % block_size + t) // block_size)
    tile0 = start // block_size
    own = torch.arange(tile0, tile0 + n_tiles, device=device)
    ids, ok = forced_block_ids(own, init_blocks, local_blocks)
    return own, ids, ok


def _forced_attention(
    q: torch.Tensor,
    kb: BlockGather,
    vb: BlockGather,
    bs: int,
    nb: int,
    row0: torch.Tensor,
    start: int,
    own: torch.Tensor,
    f_ids: torch.Tensor,
    f_ok: torch.Tensor,
    member: torch.Tensor,
    scale: float,
    pad: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of every query over its tile's forced blocks, with its log-sum-exp.

    One SDPA per (tile, KV head): ``G * block`` rows (the query heads of the KV head
    times the tile's queries) over the ``F`` forced blocks, causal inside the own block.
    A regular tile (every slot filled and selected by all its queries, no padding mask)
    uses one broadcast mask, the same for every such tile; the others get an exact mask
    from ``f_ok``, ``member`` and ``pad``.

    Args:
        q: ``[B, T, HQ, D]``; query ``t`` at key position ``start + t``.
        kb, vb: [_block_gather][lc_attention.dssa.sparse._block_gather] of the keys and
            values.
        bs: tokens per block.
        nb: number of key blocks.
        row0: ``[B, H_kv]`` first block row of each (batch, KV head).
        start: key position of the first query.
        own, f_ids, f_ok: [_forced_slots][lc_attention.dssa.sparse._forced_slots].
        member: ``[B, T, H_kv, F]`` whether a query selected each forced slot.
        scale: softmax scale.
        pad: optional ``[B, T, S]`` bool padding mask (True = attend).

    Returns:
        ``(out [B, T, H_kv, G, D] float32, lse [B, T, H_kv, G])``; ``lse = -inf`` for a
        query that sees none of its forced keys.
    """
    b, t, hq, d = q.shape
    hkv, n_f = row0.shape[1], f_ids.shape[1]
    g = hq // hkv
    n_tiles = own.shape[0]
    dev = q.device
    front = start % bs
    tq = n_tiles * bs
    # query rows computed per tile: all of them, or only the queries of a single tile
    # (a decode step computes one row, not a whole tile)
    r0, m = (front, t) if n_tiles == 1 else (0, bs)
    qp = F.pad(q, (0, 0, 0, 0, front, tq - t - front))
    qt = qp.view(b, n_tiles, bs, hkv, g, d).permute(0, 1, 3, 4, 2, 5)[..., r0 : r0 + m, :]
    rows_f = row0[:, None, :, None] + f_ids.clamp(0, nb - 1)[None, :, None, :]  # [B, nT, H, F]
    length = n_f * bs
    koff = torch.arange(bs, device=dev)
    kpos = (f_ids[..., None] * bs + koff).view(n_tiles, 1, length)
    qpos = (own[:, None] * bs + koff[r0 : r0 + m]).view(n_tiles, m, 1)
    ok = f_ok[..., None].expand(-1, -1, bs).reshape(n_tiles, 1, length) & (kpos <= qpos)
    # a padded query row (outside [start, start + T)) counts as selecting every slot
    mem = F.pad(member, (0, 0, 0, 0, front, tq - t - front), value=True)
    mem = mem.view(b, n_tiles, bs, hkv, n_f).permute(0, 1, 3, 2, 4)[..., r0 : r0 + m, :]
    if pad is not None:  # [B, nT, 1, m, L]: the padding mask at each tile's keys
        s = pad.shape[-1]
        rows = F.pad(pad, (0, 0, front, tq - t - front), value=True).view(b, n_tiles, bs, s)
        cols = kpos.clamp(0, s - 1).expand(n_tiles, m, length)
        rows = rows[:, :, r0 : r0 + m]
        pad_t = torch.gather(rows, 3, cols[None].expand(b, -1, -1, -1))[:, :, None]
    outs, lses = [], []
    if pad is None and dev.type == "cpu":  # a host read, free on CPU
        regular = (f_ok.all(1) & mem.flatten(2).all(2).all(0)).tolist()
    else:
        regular = [False] * n_tiles
    # the last tile has every slot whenever any tile has (its own block is the largest)
    pattern = torch.zeros(1, 1, g * m, length, dtype=q.dtype, device=dev)
    pattern.masked_fill_(~ok[-1].repeat(g, 1), -torch.inf)
    per = max(1, _GROUP_CHUNK_ELEMS // (b * hkv * length * d))
    cuts = [0]
    for i in range(1, n_tiles + 1):
        if i == n_tiles or regular[i] != regular[cuts[-1]] or i - cuts[-1] == per:
            cuts.append(i)
    for a, e in itertools.pairwise(cuts):
        n = e - a
        has = None
        if regular[a]:
            bias = pattern
        else:
            allowed = ok[None, a:e, None] & mem[:, a:e, ..., None].expand(
                *mem[:, a:e].shape, bs
            ).flatten(-2)  # [B, n, H, m, L]
            if pad is not None:
                allowed = allowed & pad_t[:, a:e]
            has = allowed.any(-1)
            allowed |= ~has[..., None]  # keep empty rows finite; their weight is 0 later
            full = torch.zeros(allowed.shape, dtype=q.dtype, device=dev)
            full.masked_fill_(~allowed, -torch.inf)
            bias = full[:, :, :, None].expand(-1, -1, -1, g, -1, -1)
            bias = bias.reshape(b * n * hkv, 1, g * m, length)
        rows = rows_f[:, a:e].reshape(-1)
        o, lse = attention_with_lse(
            qt[:, a:e].reshape(b * n * hkv, 1, g * m, d),
            kb(rows).view(b * n * hkv, 1, length, d),
            vb(rows).view(b * n * hkv, 1, length, d),
            scale,
            bias,
        )
        lse = lse.view(b, n, hkv, g, m)
        if has is not None:
            lse = lse.masked_fill(~has[:, :, :, None], -torch.inf)
        outs.append(o.view(b, n, hkv, g, m, d).float())
        lses.append(lse)
    o_f, lse_f = torch.cat(outs, 1), torch.cat(lses, 1)
    sl = slice(front - r0, front - r0 + t)
    out = o_f.permute(0, 1, 4, 2, 3, 5).flatten(1, 2)[:, sl]  # [B, T, H, G, D]
    return out, lse_f.permute(0, 1, 4, 2, 3).flatten(1, 2)[:, sl]


def _pair_chunks(
    pair: torch.Tensor,
    ids: torch.Tensor,
    row0: torch.Tensor,
    sink: int,
    n_keys: int,
    chunk: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(query, block) pairs grouped by block, in chunks of at most ``chunk`` queries.

    Args:
        pair: ``[B, T, H_kv, K]`` which selections are pairs.
        ids: ``[B, T, H_kv, K]`` block ids.
        row0: ``[B, H_kv]`` first block row of each (batch, KV head).
        sink: query row that fills a chunk's unused slots (one past the last row).
        n_keys: number of block rows ``B * H_kv * NB``.
        chunk: queries per chunk.

    Returns:
        ``(table [NC, chunk] query rows (b * T + t) * H_kv + h, key [NC] block row of each
        chunk)``. The number of chunks is bounded from the shapes (``P / chunk`` plus
        one partial chunk per block, for ``P`` slots), so nothing is read back from the
        device; on CPU, where a read is free, the unused chunks are cut off.
    """
    b, t, hkv, k = pair.shape
    dev = pair.device
    slots = b * t * hkv * k
    key_row = torch.where(pair, (row0[:, None, :, None] + ids), n_keys).flatten()
    q_row = torch.arange(b * t * hkv, device=dev).repeat_interleave(k)
    key_row, order = torch.sort(key_row, stable=True)
    q_row = q_row[order]
    count = torch.zeros(n_keys + 1, dtype=torch.long, device=dev)
    count.scatter_add_(0, key_row, torch.ones_like(key_row))
    count = count[:n_keys]
    n_chunks = -(-count // chunk)
    ends = torch.cumsum(n_chunks, 0)
    bound = -(-slots // chunk) + min(n_keys, slots)
    rank = torch.arange(slots, device=dev) - (torch.cumsum(count, 0) - count).index_select(
        0, key_row.clamp_max(n_keys - 1)
    )
    row = (ends - n_chunks).index_select(0, key_row.clamp_max(n_keys - 1)) + rank // chunk
    row = torch.where(key_row < n_keys, row, bound)  # non-pairs: one extra row, dropped
    table = torch.full((bound + 1, chunk), sink, dtype=torch.long, device=dev)
    table[row, rank % chunk] = q_row
    if dev.type == "cpu":
        bound = int(ends[-1]) if n_keys else 0
    keys = torch.searchsorted(ends, torch.arange(bound, device=dev), right=True)
    return table[:bound], keys.clamp_max_(max(n_keys - 1, 0))


def _merge(
    run_o: torch.Tensor,
    run_m: torch.Tensor,
    run_w: torch.Tensor,
    rows: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
) -> None:
    """Fold partial attentions ``(o [N, G, D], lse [N, G])`` into the running rows (``o``
    is overwritten).

    ``run_o / run_w`` is each row's attention so far, relative to its running maximum
    log-mass ``run_m``; ``rows [N]`` may repeat. The maximum moves first (rows touched
    are rescaled once), then the partials are added with weights ``exp(lse - max)``.
    """
    if rows.device.type == "cpu":  # only the rows touched (a host read, free on CPU)
        touched = torch.unique(rows)
        old = run_m.index_select(0, touched)
        run_m.scatter_reduce_(0, rows[:, None].expand_as(lse), lse, "amax")
        new = run_m.index_select(0, touched)
        factor = torch.exp(old - new).nan_to_num_(nan=0.0)  # -inf - -inf: nothing yet
        run_w.index_copy_(0, touched, run_w.index_select(0, touched) * factor)
        run_o.index_copy_(0, touched, run_o.index_select(0, touched) * factor[..., None])
    else:  # every row, without reading the rows back
        old = run_m.clone()
        run_m.scatter_reduce_(0, rows[:, None].expand_as(lse), lse, "amax")
        factor = torch.exp(old - run_m).nan_to_num_(nan=0.0)
        run_w.mul_(factor)
        run_o.mul_(factor[..., None])
    w = torch.exp(lse - run_m.index_select(0, rows))
    run_w.index_add_(0, rows, w)
    run_o.index_add_(0, rows, o.mul_(w[..., None]))
