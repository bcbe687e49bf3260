"""Packing, the block -> token plan of the FSA order, and the autograd.Function."""

from __future__ import annotations

from typing import Any

import torch


def dedup_indices(idx: torch.Tensor) -> torch.Tensor:
    """Sort each token's block ids and replace repeats by ``-1`` (a selection is a set)."""
    srt, _ = torch.sort(idx, dim=-1)
    dup = torch.zeros_like(srt, dtype=torch.bool)
    dup[..., 1:] = srt[..., 1:] == srt[..., :-1]
    return torch.where(dup, torch.full_like(srt, -1), srt)


def num_global_blocks(cu: torch.Tensor, block_size: int) -> int:
    """Key/value blocks of all packed sequences together (one host read of ``cu``)."""
    lens = (cu[1:] - cu[:-1]).tolist()
    return sum(-(-int(n) // block_size) for n in lens)


def max_global_blocks(num_keys: int, num_seqs: int, block_size: int) -> int:
    """An upper bound of :func:`num_global_blocks` known without reading ``cu``.

    ``sum(ceil(len_i / block_size)) <= floor(total / block_size) + num_seqs``: each
    sequence adds at most one partial block. Sizing the plan with the bound costs a few
    empty blocks and no device -> host read.
    """
    return num_keys // block_size + num_seqs


def query_layout(
    cu: torch.Tensor, cu_q: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per packed query row: its sequence, the key row where that sequence starts, and
    its position among the sequence's keys (queries sit at the end of their keys).

    Args:
        cu: ``[num_seqs + 1]`` int64 key offsets.
        cu_q: ``[num_seqs + 1]`` int64 query offsets (``cu`` itself when ``Tq == Tk``).
        n: number of packed query rows.

    Returns:
        int64 ``seq [n]``, ``kbos [n]``, ``qpos [n]``.
    """
    rows = torch.arange(n, device=cu.device)
    seq = torch.searchsorted(cu_q[1:], rows, right=True)
    if cu_q is cu:
        return seq, cu[seq], rows - cu[seq]
    shift = (cu[1:] - cu[:-1]) - (cu_q[1:] - cu_q[:-1])
    return seq, cu[seq], rows - cu_q[seq] + shift[seq]


def build_plan(
    idx: torch.Tensor,
    cu: torch.Tensor,
    block_size: int,
    chunk: int = 512,
    num_blocks: int | None = None,
    cu_q: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Block -> token index of the FSA order, built on the device without host syncs.

    Every shape is known up front (``num_blocks`` global blocks, ``N * H_kv * S`` entries,
    at most ``ceil(entries / chunk) + H_kv * num_blocks`` work chunks), so the plan is a
    fixed sequence of device ops: sort the entries by (KV head, global block), find the
    group offsets by binary search, and cut each group into chunks; chunk slots past the
    last real chunk are empty (``ch_start == ch_end``) and the kernels skip them.

    Args:
        idx: ``[N, H_kv, S]`` deduplicated block ids of packed tokens, ``-1`` = unused.
        cu: ``[num_seqs + 1]`` int64 offsets of the packed sequences (on ``idx``'s device).
        block_size: tokens per key/value block.
        chunk: most (token, slot) entries one program handles; longer lists are split.
        num_blocks: total blocks of all sequences (``sum(ceil(len / block_size))``) or an
            upper bound of it (:func:`max_global_blocks`; the spare blocks stay empty);
            computed from ``cu`` (one device -> host read) when not given.
        cu_q: ``[num_seqs + 1]`` int64 offsets of the queries when they are fewer than
            the keys (each sequence's queries sit at the end of its keys); ``cu`` by default.

    Returns:
        int64 tensors: ``tok``/``slot`` (the selecting token and the slot it used, grouped by
        (KV head, global block) and ordered by token; entries past ``off[-1]`` are
        padding), ``off`` (``[H_kv * NGB + 1]`` start of each group), and per global
        block its sequence start ``blk_bos``, index inside the sequence ``blk_j`` and
        sequence length ``blk_len``; the work chunks ``ch_key`` (``head * NGB + block``),
        ``ch_start``, ``ch_end`` (entry ranges) and ``ck_off``
        (``[H_kv * NGB + 1]``, first chunk of each key); ``qpos`` (``[N]``, each
        query's position among its sequence's keys).
    """
    n, h, s = idx.shape
    dev = idx.device
    ngb = num_global_blocks(cu, block_size) if num_blocks is None else int(num_blocks)
    lens = cu[1:] - cu[:-1]
    blk_cu = torch.zeros(lens.numel() + 1, dtype=torch.int64, device=dev)
    blk_cu[1:] = torch.cumsum((lens + block_size - 1) // block_size, 0)
    gblk = torch.arange(ngb, device=dev)
    # blocks past the real count (a bound was given) belong to no token: clamp their sequence
    seq_of_blk = torch.searchsorted(blk_cu[1:], gblk, right=True).clamp_max(lens.numel() - 1)
    seq_of_tok, _, qpos = query_layout(cu, cu if cu_q is None else cu_q, n)
    # one sort key per (token, head, slot) entry; unused slots sort last (key h * ngb)
    flat = idx.reshape(n, h, s).long()
    head = torch.arange(h, device=dev).view(1, h, 1)
    key = head * ngb + blk_cu[seq_of_tok].view(n, 1, 1) + flat
    key = torch.where(flat >= 0, key, h * ngb).reshape(-1)
    sorted_key, order = torch.sort(key, stable=True)
    off = torch.searchsorted(sorted_key, torch.arange(h * ngb + 1, device=dev))
    return {  # int64 throughout: no cast launches; the kernels read any integer width
        **chunk_plan(off, chunk, key.numel()),
        "tok": order // (h * s),
        "slot": order % s,
        "off": off,
        "blk_bos": cu[seq_of_blk],
        "blk_j": gblk - blk_cu[seq_of_blk],
        "blk_len": lens[seq_of_blk],
        "qpos": qpos,
    }


def chunk_plan(off: torch.Tensor, chunk: int, num_entries: int) -> dict[str, torch.Tensor]:
    """Cut each (KV head, block) group of entries into work chunks of at most ``chunk``.

    Args:
        off: ``[K + 1]`` int64 start of each group (``K = H_kv * NGB``), from the plan.
        chunk: most entries per chunk.
        num_entries: all entries, used or not (``N * H_kv * S``); with ``K`` it bounds the
            number of chunks, ``ceil(num_entries / chunk) + K``, which sizes the lists
            without a device read. Chunk slots past the last real chunk are empty.

    Returns:
        int64 ``ch_key`` (the group of each chunk), ``ch_start``, ``ch_end`` (its entry
        range) and ``ck_off`` (``[K + 1]``, first chunk of each group).
    """
    k = off.numel() - 1
    nch = (off[1:] - off[:-1] + chunk - 1) // chunk
    ck_off = torch.zeros_like(off)
    ck_off[1:] = torch.cumsum(nch, 0)
    slots = torch.arange(-(-num_entries // chunk) + k, device=off.device)
    ch_key = torch.searchsorted(ck_off[1:], slots, right=True).clamp_max(k - 1)
    ch_start = off[ch_key] + (slots - ck_off[ch_key]) * chunk
    ch_end = torch.minimum(ch_start + chunk, off[ch_key + 1])
    ch_end = torch.where(slots < ck_off[-1], ch_end, ch_start)
    return {"ch_key": ch_key, "ch_start": ch_start, "ch_end": ch_end, "ck_off": ck_off}


def backward_chunks(off: torch.Tensor, chunk: int, num_entries: int) -> dict[str, torch.Tensor]:
    """Work chunks of the dK/dV pass: :func:`chunk_plan` plus where partials go.

    A group with one chunk stores its dK/dV directly (``ch_part == -1``); the chunks of a
    longer group get consecutive fp32 partial slots ``ch_part``, the group's slots being
    ``hp_off[key]:hp_off[key + 1]``. Fewer than ``2 * num_entries / chunk`` slots are
    ever used (every chunk of a cut group but its last is full).
    """
    ch = chunk_plan(off, chunk, num_entries)
    ck_off = ch["ck_off"]
    nck = ck_off[1:] - ck_off[:-1]
    heavy = torch.where(nck > 1, nck, 0)
    hp_off = torch.zeros_like(ck_off)
    hp_off[1:] = torch.cumsum(heavy, 0)
    key = ch["ch_key"]
    slots = torch.arange(key.numel(), device=off.device)
    part = hp_off[key] + slots - ck_off[key]
    use = (nck[key] > 1) & (ch["ch_end"] > ch["ch_start"])
    ch["ch_part"] = torch.where(use, part, -1)
    ch["hp_off"] = hp_off
    return ch


class SelectedAttentionFunction(torch.autograd.Function):
    """Autograd glue of the Triton kernels on packed tensors ``q [N, HQ, D]``, ``k [N_k, H_kv, D]``.

    The forward runs in the chosen loop order; the backward is shared (dQ per query, dK/dV
    per block from the block -> query index, no atomics). The FSA forward's index is kept
    for the backward; the NSA order builds it in the backward.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        idx: torch.Tensor,
        cu: torch.Tensor,
        block_size: int,
        scale: float,
        order: str,
        num_blocks: int | None = None,
        cu_q: torch.Tensor | None = None,
        kvm: torch.Tensor | None = None,
    ) -> torch.Tensor:
        from lc_kernels.selected_attention import triton as kernels

        cq = cu if cu_q is None else cu_q
        _, kbos, qpos = query_layout(cu, cq, q.shape[0])
        if order == "fsa":
            _, _, chunk = kernels.fsa_tiling(q.shape[1] // k.shape[1])
            plan = build_plan(idx, cu, block_size, chunk, num_blocks, cu_q)
            o, lse = kernels.fsa_forward(q, k, v, idx, plan, block_size, scale, kvm)
            aux: tuple[torch.Tensor, ...] = tuple(plan[name] for name in _BWD_PLAN_KEYS)
        else:
            o, lse = kernels.nsa_forward(q, k, v, idx, kbos, qpos, kvm, block_size, scale)
            aux = (cu, cq)
        ctx.has_kvm = kvm is not None
        ctx.num_blocks = num_blocks
        kv = (kvm,) if kvm is not None else ()
        ctx.save_for_backward(q, k, v, idx, o, lse, kbos, qpos, *kv, *aux)
        ctx.block_size, ctx.scale, ctx.order = block_size, scale, order
        return o

    @staticmethod
    def backward(ctx: Any, do: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        from lc_kernels.selected_attention import triton as kernels

        q, k, v, idx, o, lse, kbos, qpos, *aux = ctx.saved_tensors
        kvm = aux.pop(0) if ctx.has_kvm else None
        do = do.contiguous()
        if ctx.order == "fsa":
            plan = dict(zip(_BWD_PLAN_KEYS, aux, strict=True))
        else:
            cu, cq = aux
            plan = build_plan(idx, cu, ctx.block_size, 1 << 30, ctx.num_blocks, cq)
        dq, dk, dv = kernels.selected_backward(
            q, k, v, idx, kbos, qpos, kvm, plan, o, lse, do, ctx.block_size, ctx.scale
        )
        return dq, dk, dv, None, None, None, None, None, None, None, None


#: what the backward needs of the block -> query index
_BWD_PLAN_KEYS = ("tok", "off", "blk_bos", "blk_j", "blk_len", "qpos")
