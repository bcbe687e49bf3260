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

from lc_kernels.compressed_attention import num_query_groups

# mask entries (queries x heads x gathered keys) per chunk of tiles: bounds the memory
_CHUNK_ELEMS = 1 << 22


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
    kb = F.pad(k.transpose(1, 2), (0, 0, 0, nb * block_size - s)).reshape(-1, block_size, d)
    vb = F.pad(v.transpose(1, 2), (0, 0, 0, nb * block_size - s)).reshape(-1, block_size, d)
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
    kb = F.pad(k.transpose(1, 2), (0, 0, 0, nb * bs - s)).reshape(-1, bs * d)
    vb = F.pad(v.transpose(1, 2), (0, 0, 0, nb * bs - s)).reshape(-1, bs * d)
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
    # groups from `regular` on have n_slots causal blocks: every slot holds a block
    regular = min(ng, max(0, -(-((n_slots - 1) * bs) // group) - g0))
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
