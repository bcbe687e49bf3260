"""Plain-PyTorch selected (block-sparse) attention: the test oracle and the CPU path.

Each query token attends causally to the tokens of the key/value blocks it selected.
The computation builds the dense token mask and runs an fp32 (fp64 for fp64 inputs)
masked softmax, so it is O(T^2) in memory and meant for short sequences and tests.
"""

from __future__ import annotations

import itertools

import torch

from lc_kernels._common import acc_dtype


def selection_mask(block_indices: torch.Tensor, seq_len: int, block_size: int) -> torch.Tensor:
    """Dense boolean mask of the keys each query may see.

    Args:
        block_indices: ``[B, T, H_kv, S]`` selected block ids, ``-1`` = unused slot.
        seq_len: T, the number of keys.
        block_size: tokens per key/value block.

    Returns:
        ``[B, H_kv, T, T]`` mask, True where query ``t`` sees key ``s``: ``s <= t`` and
        the block ``s // block_size`` is among the selected ones (duplicates count once).
    """
    b, t, h, _ = block_indices.shape
    nb = -(-seq_len // block_size)
    idx = block_indices.long()
    idx = torch.where(idx < 0, torch.full_like(idx, nb), idx)
    sel = torch.zeros(b, t, h, nb + 1, dtype=torch.bool, device=idx.device)
    sel.scatter_(-1, idx, True)
    tok = sel[..., :nb].repeat_interleave(block_size, dim=-1)[..., :seq_len]  # [B,T,H,Tk]
    causal = torch.ones(t, seq_len, dtype=torch.bool, device=idx.device).tril()
    return (tok & causal[None, :, None, :]).permute(0, 2, 1, 3)


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float
) -> torch.Tensor:
    """Masked softmax attention, ``mask [B, H_kv, T, Tk]``; rows with no key give 0."""
    hq, hkv = q.shape[2], k.shape[2]
    g = hq // hkv
    ad = acc_dtype(q.dtype)
    qf = q.to(ad).transpose(1, 2)  # [B, HQ, T, D]
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
) -> torch.Tensor:
    """Selected attention by a dense masked softmax (no input checks; see the public op).

    Args:
        q: ``[B, T, HQ, D]`` queries.
        k: ``[B, T, H_kv, D]`` keys; ``HQ`` is a multiple of ``H_kv``.
        v: ``[B, T, H_kv, D]`` values.
        block_indices: ``[B, T, H_kv, S]`` block ids per token, ``-1`` = unused. With
            ``cu_seqlens`` the ids count blocks from the start of each sequence.
        block_size: tokens per key/value block.
        scale: softmax scale.
        cu_seqlens: optional ``[N + 1]`` offsets of packed sequences (then ``B == 1``).

    Returns:
        ``[B, T, HQ, D]`` output in ``q.dtype``; a token that selected nothing gets 0.
    """
    if cu_seqlens is None:
        mask = selection_mask(block_indices, k.shape[1], block_size)
        return _attend(q, k, v, mask, scale)
    outs = []
    bounds = cu_seqlens.tolist()
    for a, b in itertools.pairwise(bounds):
        if b == a:
            continue
        sl = slice(a, b)
        mask = selection_mask(block_indices[:, sl], b - a, block_size)
        outs.append(_attend(q[:, sl], k[:, sl], v[:, sl], mask, scale))
    return torch.cat(outs, dim=1) if outs else torch.zeros_like(q)


def dense_causal_attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
) -> torch.Tensor:
    """Dense causal GQA attention in fp32 (fp64 for fp64 inputs); ``[B, T, HQ, D]``."""
    b, t = q.shape[:2]
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    return _attend(q, k, v, mask[None, None].expand(b, k.shape[2], t, t), scale)
