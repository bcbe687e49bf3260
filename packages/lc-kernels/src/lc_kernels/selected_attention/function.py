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


def build_plan(
    idx: torch.Tensor, cu: torch.Tensor, block_size: int, chunk: int = 512
) -> dict[str, torch.Tensor]:
    """Block -> token index of the FSA order, built with device-side sort and counts.

    Args:
        idx: ``[N, H_kv, S]`` deduplicated block ids of packed tokens, ``-1`` = unused.
        cu: ``[num_seqs + 1]`` int64 offsets of the packed sequences.
        block_size: tokens per key/value block.
        chunk: most (token, slot) entries one program handles; longer lists are split.

    Returns:
        ``tok``/``slot`` (int32, the selecting token and the slot it used, grouped by
        (KV head, global block) and ordered by token), ``off`` (int32 ``[H_kv * NGB + 1]``
        start of each group), and per global block its sequence start ``blk_bos``, index
        inside the sequence ``blk_j`` and sequence length ``blk_len``; the work chunks
        ``ch_key`` (``head * NGB + block``), ``ch_start``, ``ch_end`` (entry ranges) and
        ``ck_off`` (int32 ``[H_kv * NGB + 1]``, first chunk of each key).
    """
    _n, h, s = idx.shape
    dev = idx.device
    lens = cu[1:] - cu[:-1]
    nblk = (lens + block_size - 1) // block_size
    blk_cu = torch.zeros(nblk.numel() + 1, dtype=torch.int64, device=dev)
    blk_cu[1:] = torch.cumsum(nblk, 0)
    ngb = int(blk_cu[-1])
    seq_of_blk = torch.repeat_interleave(torch.arange(nblk.numel(), device=dev), nblk)
    blk_j = torch.arange(ngb, device=dev) - blk_cu[seq_of_blk]
    tok_seq = torch.repeat_interleave(torch.arange(lens.numel(), device=dev), lens)
    flat = idx.reshape(-1).long()
    valid = flat >= 0
    entry = torch.nonzero(valid).squeeze(1)
    tok = entry // (h * s)
    head = (entry // s) % h
    gblk = blk_cu[tok_seq[tok]] + flat[entry]
    key = head * ngb + gblk
    order = torch.argsort(key, stable=True)
    counts = torch.bincount(key, minlength=h * ngb)
    off = torch.zeros(h * ngb + 1, dtype=torch.int64, device=dev)
    off[1:] = torch.cumsum(counts, 0)
    nch = (counts + chunk - 1) // chunk
    ck_off = torch.zeros_like(off)
    ck_off[1:] = torch.cumsum(nch, 0)
    ch_key = torch.repeat_interleave(torch.arange(h * ngb, device=dev), nch)
    ch_start = off[ch_key] + (torch.arange(ch_key.numel(), device=dev) - ck_off[ch_key]) * chunk
    ch_end = torch.minimum(ch_start + chunk, off[ch_key + 1])
    return {
        "ch_key": ch_key.to(torch.int32),
        "ch_start": ch_start.to(torch.int32),
        "ch_end": ch_end.to(torch.int32),
        "ck_off": ck_off.to(torch.int32),
        "tok": tok[order].to(torch.int32),
        "slot": (entry[order] % s).to(torch.int32),
        "off": off.to(torch.int32),
        "blk_bos": cu[seq_of_blk].to(torch.int32),
        "blk_j": blk_j.to(torch.int32),
        "blk_len": lens[seq_of_blk].to(torch.int32),
    }


class SelectedAttentionFunction(torch.autograd.Function):
    """Autograd glue of the Triton kernels on packed tensors ``q [N, HQ, D]``."""

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
    ) -> torch.Tensor:
        from lc_kernels.selected_attention import triton as kernels

        if order == "fsa":
            _, _, chunk = kernels.fsa_tiling(q.shape[1] // k.shape[1])
            plan = build_plan(idx, cu, block_size, chunk)
            o, lse = kernels.fsa_forward(q, k, v, idx, plan, block_size, scale)
            aux: tuple[torch.Tensor, ...] = tuple(plan[name] for name in _PLAN_KEYS)
        else:
            tok_seq = torch.repeat_interleave(
                torch.arange(cu.numel() - 1, device=q.device), cu[1:] - cu[:-1]
            )
            tok_bos = cu[tok_seq].to(torch.int32)
            o, lse = kernels.nsa_forward(q, k, v, idx, tok_bos, block_size, scale)
            aux = (tok_bos,)
        ctx.save_for_backward(q, k, v, idx, o, lse, *aux)
        ctx.block_size, ctx.scale, ctx.order = block_size, scale, order
        return o

    @staticmethod
    def backward(ctx: Any, do: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        from lc_kernels.selected_attention import triton as kernels

        q, k, v, idx, o, lse, *aux = ctx.saved_tensors
        do = do.contiguous()
        if ctx.order == "fsa":
            plan = dict(zip(_PLAN_KEYS, aux, strict=True))
            dq, dk, dv = kernels.fsa_backward(
                q, k, v, idx, plan, o, lse, do, ctx.block_size, ctx.scale
            )
        else:
            dq, dk, dv = kernels.nsa_backward(
                q, k, v, idx, aux[0], o, lse, do, ctx.block_size, ctx.scale
            )
        return dq, dk, dv, None, None, None, None, None


_PLAN_KEYS = (
    "tok",
    "slot",
    "off",
    "blk_bos",
    "blk_j",
    "blk_len",
    "ch_key",
    "ch_start",
    "ch_end",
    "ck_off",
)
