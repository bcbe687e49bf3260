"""Plain-PyTorch selected (block-sparse) attention: the test oracle and the CPU path.

Each query token attends causally to the tokens of the key/value blocks it selected.
The computation builds the dense token mask and runs an fp32 (fp64 for fp64 inputs)
masked softmax, so it is O(Tq * Tk) in memory and meant for short sequences and tests.
It reads nothing back to the host (no ``.item()``/``.tolist()``), so it traces under
``torch.compile(fullgraph=True)``.

Queries may be fewer than keys (decode, chunked prefill): ``q [B, Tq, ...]`` against
``k [B, Tk, ...]`` with ``Tq <= Tk``, the queries aligned to the end of the keys, so
query ``t`` sits at key position ``Tk - Tq + t`` (the convention of a KV cache).
"""

from __future__ import annotations

import torch

from lc_kernels._common import acc_dtype, token_positions


def _mask_from_positions(
    block_indices: torch.Tensor,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    block_size: int,
    num_blocks: int,
    same_seq: torch.Tensor | None,
    kv_valid: torch.Tensor | None,
) -> torch.Tensor:
    """``[B, H_kv, Tq, Tk]`` mask from query positions ``[Tq]`` and key positions ``[Tk]``."""
    b, tq, h, _ = block_indices.shape
    tk = k_pos.numel()
    idx = block_indices.long()
    # unused slots (-1) and ids past the last block land in the spare column ``num_blocks``
    idx = torch.where((idx < 0) | (idx >= num_blocks), torch.full_like(idx, num_blocks), idx)
    sel = torch.zeros(b, tq, h, num_blocks + 1, dtype=torch.bool, device=idx.device)
    sel.scatter_(-1, idx, True)
    tok = sel[..., k_pos // block_size]  # [B, Tq, H, Tk]: key's block selected by the query
    allowed = k_pos.view(1, tk) <= q_pos.view(tq, 1)
    if same_seq is not None:
        allowed = allowed & same_seq
    mask = tok & allowed[None, :, None, :]
    if kv_valid is not None:
        mask = mask & kv_valid.view(b, 1, 1, tk)
    return mask.permute(0, 2, 1, 3)


def selection_mask(
    block_indices: torch.Tensor,
    seq_len: int,
    block_size: int,
    kv_valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Dense boolean mask of the keys each query may see.

    Args:
        block_indices: ``[B, Tq, H_kv, S]`` selected block ids, ``-1`` = unused slot.
        seq_len: Tk, the number of keys (``>= Tq``); query ``t`` sits at key position
            ``Tk - Tq + t``.
        block_size: tokens per key/value block.
        kv_valid: optional ``[B, Tk]`` bool, True for a real key, False for padding.

    Returns:
        ``[B, H_kv, Tq, Tk]`` mask, True where query ``t`` sees key ``s``:
        ``s <= Tk - Tq + t``, the block ``s // block_size`` is among the selected ones
        (duplicates count once) and ``kv_valid[b, s]`` (when given).
    """
    tq = block_indices.shape[1]
    dev = block_indices.device
    k_pos = torch.arange(seq_len, device=dev)
    q_pos = torch.arange(tq, device=dev) + (seq_len - tq)
    nb = -(-seq_len // block_size)
    return _mask_from_positions(block_indices, q_pos, k_pos, block_size, nb, None, kv_valid)


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float
) -> torch.Tensor:
    """Masked softmax attention, ``mask [B, H_kv, Tq, Tk]``; rows with no key give 0."""
    hq, hkv = q.shape[2], k.shape[2]
    g = hq // hkv
    ad = acc_dtype(q.dtype)
    qf = q.to(ad).transpose(1, 2)  # [B, HQ, Tq, D]
    kf = k.to(ad).repeat_interleave(g, dim=2).transpose(1, 2)
    vf = v.to(ad).repeat_interleave(g, dim=2).transpose(1, 2)
    m = mask.repeat_interleave(g, dim=1)
    scores = (qf @ kf.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~m, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    p = torch.where(m.any(-1, keepdim=True), p, torch.zeros_like(p))
    return (p @ vf).transpose(1, 2).to(q.dtype)


def selected_attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_indices: torch.Tensor,
    block_size: int,
    scale: float,
    cu_seqlens: torch.Tensor | None = None,
    kv_valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Selected attention by a dense masked softmax (no input checks; see the public op).

    Args:
        q: ``[B, Tq, HQ, D]`` queries; query ``t`` sits at key position ``Tk - Tq + t``.
        k: ``[B, Tk, H_kv, D]`` keys (``Tk >= Tq``); ``HQ`` is a multiple of ``H_kv``.
        v: ``[B, Tk, H_kv, D]`` values.
        block_indices: ``[B, Tq, H_kv, S]`` block ids per query, ``-1`` = unused. With
            ``cu_seqlens`` the ids count blocks from the start of each sequence.
        block_size: tokens per key/value block.
        scale: softmax scale.
        cu_seqlens: optional ``[N + 1]`` offsets of packed sequences (then ``B == 1`` and
            ``Tq == Tk``).
        kv_valid: optional ``[B, Tk]`` bool, False for padded keys (never attended).

    Returns:
        ``[B, Tq, HQ, D]`` output in ``q.dtype``; a query that sees no key gets 0.
    """
    tk = k.shape[1]
    if cu_seqlens is None:
        mask = selection_mask(block_indices, tk, block_size, kv_valid)
        return _attend(q, k, v, mask, scale)
    # packed sequences: positions inside each sequence, keys of other sequences masked
    seq_id, pos = token_positions(cu_seqlens.long(), tk)
    same = seq_id.view(tk, 1) == seq_id.view(1, tk)
    nb = -(-tk // block_size)  # no sequence has more blocks than the whole pack
    mask = _mask_from_positions(block_indices, pos, pos, block_size, nb, same, kv_valid)
    return _attend(q, k, v, mask, scale)


def dense_causal_attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
) -> torch.Tensor:
    """Dense causal GQA attention in fp32 (fp64 for fp64 inputs); ``[B, T, HQ, D]``.

    With fewer queries than keys (``q [B, Tq, ...]``, ``k [B, Tk, ...]``) the queries are
    aligned to the end of the keys.
    """
    b, tq = q.shape[:2]
    tk = k.shape[1]
    mask = torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril(tk - tq)
    return _attend(q, k, v, mask[None, None].expand(b, k.shape[2], tq, tk), scale)
