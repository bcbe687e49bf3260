"""Block-sparse attention by query tiles: gather the union of a tile's selected blocks.

The CPU path of DSSA's second stage. Consecutive queries are cut into tiles; each tile
gathers, per KV head, the union of the key blocks its queries selected and runs one
dense SDPA over them, with an additive mask that keeps, for every query, only its own
blocks, causal keys and (optionally) the padding mask. The work is
``O(T * U * block_size)`` for a union of ``U`` blocks per tile instead of ``O(T * S)``;
when the queries of a tile share their selection (``DSSAConfig.query_block``) the union
is exactly the ``topk`` selected blocks.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F

from lc_kernels.block_select import forced_block_ids
from lc_kernels.compressed_attention import num_query_groups

# mask entries (queries x heads x gathered keys) per chunk of tiles: bounds the memory
_CHUNK_ELEMS = 1 << 22


def block_rows(x: torch.Tensor, block_size: int) -> torch.Tensor:
    """Keys or values as a table of blocks: ``[B, S, H, D] -> [B * H * NB, block, D]``.

    Row ``(b * H + h) * NB + j`` holds block ``j`` of head ``h``; the last block is
    zero-padded to ``block_size`` keys (``NB = ceil(S / block_size)``).

    Example:
        >>> block_rows(torch.ones(1, 5, 2, 3), 4).shape
        torch.Size([4, 4, 3])
    """
    s, d = x.shape[1], x.shape[3]
    nb = -(-s // block_size)
    return F.pad(x.transpose(1, 2), (0, 0, 0, nb * block_size - s)).reshape(-1, block_size, d)


def tiled_selected_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    idx: torch.Tensor,
    positions: torch.Tensor,
    block_size: int,
    scale: float,
    tile: int = 64,
    allowed_pad: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of each query over exactly its selected key blocks (causal).

    Args:
        q: ``[B, T, HQ, D]`` queries.
        k: ``[B, S, H_kv, D]`` keys; ``HQ`` a multiple of ``H_kv``.
        v: ``[B, S, H_kv, D]`` values.
        idx: ``[B, T, H_kv, K]`` selected block ids per query, ``-1`` = unused slot
            (duplicates count once).
        positions: ``[T]`` key positions of the queries (query ``t`` sees keys
            ``<= positions[t]``).
        block_size: tokens per key block.
        scale: softmax scale.
        tile: queries per tile.
        allowed_pad: optional ``[B, 1, T, S]`` bool mask (True = attend), combined
            with the selection.

    Returns:
        ``[B, T, HQ, D]``; a query with no allowed key gets 0.

    Example:
        >>> import torch
        >>> q = torch.randn(1, 128, 4, 8); k = torch.randn(1, 128, 2, 8)
        >>> idx = torch.tensor([0, 1]).expand(1, 128, 2, 2).int()
        >>> tiled_selected_attention(q, k, k, idx, torch.arange(128), 64, 0.35).shape
        torch.Size([1, 128, 4, 8])
    """
    b, t, hq, d = q.shape
    s, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    nb = -(-s // block_size)
    dev = q.device
    n_tiles = -(-t // tile)
    pad = n_tiles * tile - t
    ids = idx.long()
    ids = torch.where(ids < 0, torch.full_like(ids, nb), ids)
    pos = positions.to(dev).long()
    if pad:
        q = F.pad(q, (0, 0, 0, 0, 0, pad))
        ids = torch.cat([ids, ids.new_full((b, pad, *ids.shape[2:]), nb)], 1)
        pos = torch.cat([pos, pos.new_full((pad,), -1)])
    # per-query membership of every block, and the per-tile union
    tok_sel = torch.zeros(b, n_tiles * tile, hkv, nb + 1, dtype=torch.bool, device=dev)
    tok_sel.scatter_(-1, ids, True)
    tok_sel = tok_sel[..., :nb].view(b, n_tiles, tile, hkv, nb).transpose(2, 3)
    union = tok_sel.any(3)  # [B, nT, H_kv, NB]
    counts = union.sum(-1)  # [B, nT, H_kv]
    # keys and values as rows of blocks [B * H_kv * NB, block, D]
    kb, vb = block_rows(k, block_size), block_rows(v, block_size)
    # each (tile, KV head) is one SDPA batch entry with G query heads and one KV head
    qt = q.view(b, n_tiles, tile, hkv, g, d).permute(0, 1, 3, 4, 2, 5)  # [B,nT,H,G,tile,D]
    out = q.new_empty(b, n_tiles, hkv, g, tile, d)
    offs = torch.arange(block_size, device=dev)
    # the union sizes set the gather shapes: read once per call (the only host read)
    tile_union = counts.amax((0, 2)).tolist()
    per_tile = max(1, *tile_union) * block_size * tile * hkv * b
    per_chunk = max(1, _CHUNK_ELEMS // per_tile)
    row0 = (
        torch.arange(b, device=dev).view(b, 1, 1, 1) * hkv
        + torch.arange(hkv, device=dev).view(1, 1, hkv, 1)
    ) * nb
    neg = torch.tensor(float("-inf"), dtype=q.dtype, device=dev)
    for a in range(0, n_tiles, per_chunk):
        e = min(n_tiles, a + per_chunk)
        n = e - a
        u = max(1, *tile_union[a:e])
        # union block ids first (ascending), then filler blocks that stay masked
        not_in = (~union[:, a:e]).to(torch.uint8)
        order = torch.sort(not_in, dim=-1, stable=True).indices[..., :u]  # [B, n, H, u]
        length = u * block_size
        rows_kv = (row0 + order).flatten()
        kg = kb.index_select(0, rows_kv).view(b * n * hkv, 1, length, d)
        vg = vb.index_select(0, rows_kv).view(b * n * hkv, 1, length, d)
        # per query: its own blocks (fillers are in nobody's), causal keys, padding
        mem = torch.gather(tok_sel[:, a:e], -1, order[:, :, :, None].expand(-1, -1, -1, tile, -1))
        tok = (order[..., None] * block_size + offs).view(b, n, hkv, 1, length)
        qpos = pos[a * tile : e * tile].view(1, n, 1, tile, 1)
        visible = tok <= qpos  # [B, n, H_kv, tile, L]
        if allowed_pad is not None:
            rows = F.pad(allowed_pad[:, 0], (0, 0, 0, pad))[:, a * tile : e * tile]
            rows = rows.view(b, n, 1, tile, s).expand(-1, -1, hkv, -1, -1)
            visible &= torch.gather(rows, -1, tok.clamp_max(s - 1).expand_as(visible))
            has: torch.Tensor | None = (
                (visible.view(*mem.shape, block_size) & mem[..., None]).flatten(-2).any(-1)
            )
        else:
            has = None  # a query always sees its selected blocks before its own position
        block_bias = torch.where(mem, 0.0, neg)[..., None]  # [B, n, H_kv, tile, u, 1]
        bias = torch.where(visible.view(*mem.shape, block_size), block_bias, neg)
        if has is not None:
            bias.masked_fill_(~has[..., None, None], 0.0)  # keep empty rows finite
        o = F.scaled_dot_product_attention(
            qt[:, a:e].reshape(b * n * hkv, g, tile, d),
            kg,
            vg,
            attn_mask=bias.view(b * n * hkv, 1, tile, length),
            scale=scale,
            enable_gqa=True,
        ).view(b, n, hkv, g, tile, d)
        if has is not None:
            o = o * has[:, :, :, None, :, None]
        out[:, a:e] = o
    return out.permute(0, 1, 4, 2, 3, 5).reshape(b, n_tiles * tile, hq, d)[:, :t]


# gathered key and value entries (groups x heads x keys x head_dim) per chunk of groups
_GROUP_CHUNK_ELEMS = 1 << 21


def grouped_selected_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    idx: torch.Tensor,
    start: int,
    block_size: int,
    scale: float,
    group: int,
    full_from: int = 0,
) -> torch.Tensor:
    """Causal attention of position-aligned query groups over their shared key blocks.

    The CPU prefill path of ``DSSAConfig.query_block``: the queries at positions
    ``[i * group, (i + 1) * group)`` share one selection, so each group gathers exactly
    its ``K`` blocks (``index_select`` of whole blocks) and runs one SDPA over them. The
    ids are sorted, so the group's own block, which holds its queries, comes last. Once
    a group has ``K`` causal blocks before and including its own (every slot filled),
    the only mask is the causal one inside its own block, the same for every such group
    at the same offset in a block: one small additive mask broadcast over the batch.
    Earlier groups (slots left at ``-1``) get an exact mask built from their ids. The
    work is ``O(T * K * block_size)`` and nothing is read back from the device.
    Differentiable in ``q``, ``k`` and ``v`` (the block ids are data, not parameters).

    Args:
        q: ``[B, T, HQ, D]`` queries; query ``t`` sits at key position ``start + t``.
        k: ``[B, S, H_kv, D]`` keys; ``HQ`` a multiple of ``H_kv``.
        v: ``[B, S, H_kv, D]`` values.
        idx: ``[B, NG, H_kv, K]`` distinct block ids of each group (``-1`` = unused slot),
            ``NG = (start + T - 1) // group - start // group + 1``. Every group must
            select its own block (the block of its positions) and no later block, as
            DSSA's selection does when ``local_blocks >= 1``.
        start: key position of the first query.
        block_size: tokens per key block.
        scale: softmax scale.
        group: queries per group; divides ``block_size``.
        full_from: no group before this one (counted from the call's first) is taken to
            fill every slot, even with ``K`` causal blocks behind it (a budget that
            grows with the position leaves slots unused:
            [first_full_group][lc_attention.dssa.selection.first_full_group]).

    Returns:
        ``[B, T, HQ, D]``.

    Example:
        >>> import torch
        >>> q = torch.randn(1, 128, 4, 8); k = torch.randn(1, 128, 2, 8)
        >>> idx = torch.tensor([[0, -1], [0, 1]]).view(1, 2, 1, 2).expand(1, 2, 2, 2)
        >>> grouped_selected_attention(q, k, k, idx, 0, 64, 0.35, 64).shape
        torch.Size([1, 128, 4, 8])
    """
    b, t, hq, d = q.shape
    s, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    n_slots = idx.shape[-1]
    bs = block_size
    if bs % group:
        raise ValueError(f"group={group} must divide block_size={bs}")
    length = n_slots * bs
    nb = -(-s // bs)
    dev = q.device
    g0 = start // group
    ng = num_query_groups(start, t, group)
    if idx.shape[:3] != (b, ng, hkv):
        raise ValueError(f"idx {tuple(idx.shape)}: expected [{b}, {ng}, {hkv}, K]")
    front = start - g0 * group
    tq = ng * group
    if front or tq != t:
        q = F.pad(q, (0, 0, 0, 0, front, tq - t - front))
    # [B, NG, H_kv, G * group, D]: the G heads of a KV head and the group's queries
    # form the rows of one SDPA batch entry (one KV head, no GQA broadcast)
    qg = q.view(b, ng, group, hkv, g, d).permute(0, 1, 3, 4, 2, 5)
    ids = idx.long().sort(-1).values  # ascending: unused first, the own block last
    valid = ids >= 0
    rows_kv = (
        torch.arange(b, device=dev).view(b, 1, 1, 1) * hkv
        + torch.arange(hkv, device=dev).view(1, 1, hkv, 1)
    ) * nb + ids.clamp_min(0)  # [B, NG, H_kv, K] rows of the block table
    kb, vb = block_rows(k, bs).view(-1, bs * d), block_rows(v, bs).view(-1, bs * d)
    out = q.new_empty(b, ng, group, hkv, g, d)
    neg = float("-inf")
    koff = torch.arange(bs, device=dev)
    # causal mask inside the own block for a group at offset c * group of its block
    per = bs // group
    qoff = torch.arange(per * group, device=dev).view(per, 1, group, 1)
    own = torch.zeros(per, 1, group, bs, dtype=q.dtype, device=dev)
    own.masked_fill_(koff > qoff, neg)
    pattern = torch.cat([own.new_zeros(per, 1, group, length - bs), own], -1)
    pattern = pattern.repeat(1, 1, g, 1)  # rows: G heads x group queries
    # groups from `regular` on have n_slots causal blocks and fill every slot
    regular = min(ng, max(0, full_from, -(-((n_slots - 1) * bs) // group) - g0))
    per_chunk = max(1, _GROUP_CHUNK_ELEMS // (b * hkv * length * d))
    cuts = sorted({0, regular, ng, *range(regular, ng, per_chunk), *range(0, regular, per_chunk)})
    # gather into reused buffers, except when a gradient must flow back to k and v
    grad = torch.is_grad_enabled() and (k.requires_grad or v.requires_grad)
    kbuf = kb.new_empty(0 if grad else b * min(per_chunk, ng) * hkv * n_slots, bs * d)
    vbuf = torch.empty_like(kbuf)
    for a, e in itertools.pairwise(cuts):
        n = e - a
        rows = rows_kv[:, a:e].reshape(-1)
        if grad:
            kg, vg = kb.index_select(0, rows), vb.index_select(0, rows)
        else:
            kg = torch.index_select(kb, 0, rows, out=kbuf[: rows.numel()])
            vg = torch.index_select(vb, 0, rows, out=vbuf[: rows.numel()])
        if a >= regular and per == 1:
            mask = pattern  # [1, 1, G * group, L]: broadcast
        elif a >= regular:
            cls = (torch.arange(g0 + a, g0 + e, device=dev) % per).repeat_interleave(hkv)
            mask = pattern.index_select(0, cls.repeat(b))  # [B * n * H_kv, 1, G*group, L]
        else:  # early groups: slots may be unused, blocks checked against each position
            tok = (ids[:, a:e, :, :, None] * bs + koff).flatten(-2)  # [B, n, H_kv, L]
            ok = valid[:, a:e, :, :, None].expand(-1, -1, -1, -1, bs).flatten(-2)
            qpos = torch.arange((g0 + a) * group, (g0 + e) * group, device=dev)
            qpos = qpos.view(1, n, 1, group, 1)
            seen = ok[:, :, :, None] & (tok[:, :, :, None] <= qpos)  # [B, n, H, group, L]
            mask = torch.zeros(seen.shape, dtype=q.dtype, device=dev).masked_fill_(~seen, neg)
            mask = mask.view(b * n * hkv, 1, group, length).repeat(1, 1, g, 1)
        o = F.scaled_dot_product_attention(
            qg[:, a:e].reshape(b * n * hkv, 1, g * group, d),
            kg.view(b * n * hkv, 1, length, d),
            vg.view(b * n * hkv, 1, length, d),
            attn_mask=mask,
            scale=scale,
        )
        out[:, a:e] = o.view(b, n, hkv, g, group, d).permute(0, 1, 4, 2, 3, 5)
    return out.view(b, tq, hq, d)[:, front : front + t]


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
        bfloat16, float16) this is one pass of PyTorch's flash-attention kernel, which
        returns both; elsewhere plain matrix products in float32 (float64 for float64).
    """
    if q.device.type == "cpu" and q.dtype in (torch.float32, torch.bfloat16, torch.float16):
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


# query rows (queries x heads x head_dim) per batch of key-block chunks: bounds memory
_PAIR_CHUNK_ELEMS = 1 << 23


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
) -> torch.Tensor:
    """Causal attention of every query over its own selected blocks, key block by key block.

    The CPU prefill path of per-query selection (``DSSAConfig.query_block = 1``). The
    blocks every query of a ``block_size``-aligned tile is forced to take (the first
    ``init_blocks``, the ``local_blocks`` most recent and its own block) are the same
    for the whole tile: one SDPA per (tile, KV head) over them, causal inside the own
    block. Every other selected block ``j`` of query ``t`` (strictly before ``t``'s
    block, so fully visible) is one (query, block) pair: the pairs are sorted by block,
    the queries of each block cut into chunks of ``chunk``, and each chunk attends to
    its one block (as Flash Sparse Attention loops over key blocks and gathers the
    queries that chose them). The partial results are merged with their log-sum-exp.
    The work is that of the selection itself, ``O(T * K * block_size)``, with no union
    of neighbouring queries' blocks and no mask outside the own block. Inference only
    (no autograd); reads the number of pairs back once.

    Args:
        q: ``[B, T, HQ, D]`` queries; query ``t`` sits at key position ``start + t``.
        k: ``[B, S, H_kv, D]`` keys; ``HQ`` a multiple of ``H_kv``; ``start + T <= S``.
        v: ``[B, S, H_kv, D]`` values.
        idx: ``[B, T, H_kv, K]`` block ids per query (``-1`` = unused slot, duplicates
            count once, future blocks are ignored). A forced block that a query did not
            select is masked out for that query.
        start: key position of the first query.
        block_size: tokens per key block.
        scale: softmax scale.
        init_blocks: leading blocks forced for every query.
        local_blocks: most recent blocks (own block included) forced for every query.
        chunk: queries per (key block, chunk) product.

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
    # keys and values as rows of blocks [B * H_kv * NB, block, D]
    kb, vb = block_rows(k, bs), block_rows(v, bs)
    row0 = (torch.arange(b, device=dev)[:, None] * hkv + torch.arange(hkv, device=dev)) * nb
    o_f, lse_f = _forced_attention(q, kb, vb, row0, start, own, f_ids, f_ok, member, scale)
    # running state per (batch, query, KV head) row: weighted sum, max log-mass, weight,
    # plus one more row, a sink for the padding slots of the chunks
    n_rows = b * t * hkv
    run_o = torch.zeros(n_rows + 1, g, d, device=dev)
    run_m = torch.full((n_rows + 1, g), -torch.inf, device=dev)
    run_o[:n_rows].view(b, t, hkv, g, d).copy_(o_f)  # one copy from the tiles' layout
    run_m[:n_rows].view(b, t, hkv, g).copy_(lse_f)
    run_w = torch.isfinite(run_m).float()
    run_o.mul_(run_w[..., None])
    table, chunk_key = _pair_chunks(pair, ids, row0, n_rows, b * hkv * nb, chunk)
    q_rows = q.reshape(n_rows, g * d)
    per = max(1, _PAIR_CHUNK_ELEMS // (chunk * g * d))
    for a in range(0, table.shape[0], per):
        tgt = table[a : a + per].reshape(-1)
        keys = chunk_key[a : a + per]
        n = keys.shape[0]
        o, lse = attention_with_lse(
            q_rows.index_select(0, tgt.clamp_max(n_rows - 1)).view(n, 1, chunk * g, d),
            kb.index_select(0, keys).view(n, 1, bs, d),
            vb.index_select(0, keys).view(n, 1, bs, d),
            scale,
            None,
        )
        _merge(run_o, run_m, run_w, tgt, o.view(-1, g, d).float(), lse.view(-1, g))
    out = run_o[:n_rows] / run_w[:n_rows, :, None].clamp_min(torch.finfo(torch.float32).tiny)
    return out.view(b, t, hq, d).to(q.dtype)


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
    kb: torch.Tensor,
    vb: torch.Tensor,
    row0: torch.Tensor,
    start: int,
    own: torch.Tensor,
    f_ids: torch.Tensor,
    f_ok: torch.Tensor,
    member: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of every query over its tile's forced blocks, with its log-sum-exp.

    One SDPA per (tile, KV head): ``G * block`` rows (the query heads of the KV head
    times the tile's queries) over the ``F`` forced blocks, causal inside the own block.
    A regular tile (every slot filled and selected by all its queries) uses one
    broadcast mask, the same for every such tile; the others get an exact mask from
    ``f_ok`` and ``member``.

    Args:
        q: ``[B, T, HQ, D]``; query ``t`` at key position ``start + t``.
        kb, vb: ``[B * H_kv * NB, block, D]`` key and value blocks.
        row0: ``[B, H_kv]`` first block row of each (batch, KV head).
        start: key position of the first query.
        own, f_ids, f_ok: [_forced_slots][lc_attention.dssa.sparse._forced_slots].
        member: ``[B, T, H_kv, F]`` whether a query selected each forced slot.
        scale: softmax scale.

    Returns:
        ``(out [B, T, H_kv, G, D] float32, lse [B, T, H_kv, G])``; ``lse = -inf`` for a
        query that sees none of its forced keys.
    """
    b, t, hq, d = q.shape
    hkv, n_f = row0.shape[1], f_ids.shape[1]
    g = hq // hkv
    n_tiles = own.shape[0]
    bs = kb.shape[1]
    nb = kb.shape[0] // row0.numel()
    dev = q.device
    front = start % bs
    tq = n_tiles * bs
    qp = F.pad(q, (0, 0, 0, 0, front, tq - t - front))
    qt = qp.view(b, n_tiles, bs, hkv, g, d).permute(0, 1, 3, 4, 2, 5)  # [B, nT, H, G, bs, D]
    rows_f = row0[:, None, :, None] + f_ids.clamp(0, nb - 1)[None, :, None, :]  # [B, nT, H, F]
    length = n_f * bs
    koff = torch.arange(bs, device=dev)
    kpos = (f_ids[..., None] * bs + koff).view(n_tiles, 1, length)
    qpos = (own[:, None] * bs + koff).view(n_tiles, bs, 1)
    ok = f_ok[..., None].expand(-1, -1, bs).reshape(n_tiles, 1, length) & (kpos <= qpos)
    # a padded query row (outside [start, start + T)) counts as selecting every slot
    mem = F.pad(member, (0, 0, 0, 0, front, tq - t - front), value=True)
    mem = mem.view(b, n_tiles, bs, hkv, n_f).permute(0, 1, 3, 2, 4)  # [B, nT, H, bs, F]
    o_f = torch.empty(b, n_tiles, hkv, g, bs, d, device=dev)
    lse_f = torch.empty(b, n_tiles, hkv, g, bs, device=dev)
    regular = (f_ok.all(1) & mem.flatten(2).all(2).all(0)).tolist()
    # the last tile has every slot whenever any tile has (its own block is the largest)
    pattern = torch.zeros(1, 1, g * bs, length, dtype=q.dtype, device=dev)
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
            ).flatten(-2)  # [B, n, H, bs, L]
            has = allowed.any(-1)
            allowed |= ~has[..., None]  # keep empty rows finite; their weight is 0 later
            full = torch.zeros(allowed.shape, dtype=q.dtype, device=dev)
            full.masked_fill_(~allowed, -torch.inf)
            bias = full[:, :, :, None].expand(-1, -1, -1, g, -1, -1)
            bias = bias.reshape(b * n * hkv, 1, g * bs, length)
        rows = rows_f[:, a:e].reshape(-1)
        o, lse = attention_with_lse(
            qt[:, a:e].reshape(b * n * hkv, 1, g * bs, d),
            kb.index_select(0, rows).view(b * n * hkv, 1, length, d),
            vb.index_select(0, rows).view(b * n * hkv, 1, length, d),
            scale,
            bias,
        )
        o_f[:, a:e] = o.view(b, n, hkv, g, bs, d)
        lse_f[:, a:e] = lse.view(b, n, hkv, g, bs)
        if has is not None:
            lse_f[:, a:e].masked_fill_(~has[:, :, :, None], -torch.inf)
    sl = slice(front, front + t)
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
        chunk)``; reads the number of chunks back once.
    """
    t, hkv = pair.shape[1], pair.shape[2]
    dev = pair.device
    bi, ti, hi, si = pair.nonzero(as_tuple=True)
    key_row, order = torch.sort(row0[bi, hi] + ids[bi, ti, hi, si], stable=True)
    q_row = ((bi * t + ti) * hkv + hi)[order]
    count = torch.bincount(key_row, minlength=n_keys)
    n_chunks = -(-count // chunk)
    chunk0 = torch.cumsum(n_chunks, 0) - n_chunks
    rank = torch.arange(key_row.numel(), device=dev) - (torch.cumsum(count, 0) - count)[key_row]
    table = torch.full((int(n_chunks.sum()), chunk), sink, dtype=torch.long, device=dev)
    table[chunk0[key_row] + rank // chunk, rank % chunk] = q_row
    return table, torch.repeat_interleave(torch.arange(n_keys, device=dev), n_chunks)


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
    touched = torch.unique(rows)
    old = run_m.index_select(0, touched)
    run_m.scatter_reduce_(0, rows[:, None].expand_as(lse), lse, "amax")
    new = run_m.index_select(0, touched)
    factor = torch.exp(old - new).nan_to_num_(nan=0.0)  # -inf - -inf: nothing yet
    run_w.index_copy_(0, touched, run_w.index_select(0, touched) * factor)
    run_o.index_copy_(0, touched, run_o.index_select(0, touched) * factor[..., None])
    w = torch.exp(lse - run_m.index_select(0, rows))
    run_w.index_add_(0, rows, w)
    run_o.index_add_(0, rows, o.mul_(w[..., None]))
