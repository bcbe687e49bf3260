"""Decode-time state of an NSA layer and the attention of new tokens against it."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class NSACache:
    """Key/value cache of one [NativeSparseAttention][lc_attention.nsa.layer.NativeSparseAttention] layer.

    Holds the unrotated keys and values seen so far (``[B, L, H_kv, D]``), their RoPE'd
    keys, and the compressed keys/values of every complete span (``[B, C, H_kv, D]``).
    New spans are compressed as soon as their last token arrives, so each step costs
    O(new tokens) compression work. Start with an empty ``NSACache()``.
    """

    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    k_rot: torch.Tensor | None = None
    k_cmp: torch.Tensor | None = None
    v_cmp: torch.Tensor | None = None
    meta: dict[str, int] = field(default_factory=dict)

    @property
    def length(self) -> int:
        """Number of cached tokens."""
        return 0 if self.k is None else int(self.k.shape[1])


def masked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float
) -> torch.Tensor:
    """``q [B, n, HQ, D]`` over ``k, v [B, L, H_kv, D]`` with ``mask [B, n, H_kv or 1, L]``; empty rows give 0."""
    g = q.shape[2] // k.shape[2]
    ad = torch.float64 if q.dtype == torch.float64 else torch.float32
    s = torch.einsum("bnhd,blhd->bnhl", q.to(ad), k.to(ad).repeat_interleave(g, 2)) * scale
    m = mask.repeat_interleave(g, 2) if mask.shape[2] > 1 else mask
    s = s.masked_fill(~m, float("-inf"))
    p = torch.softmax(s, -1)
    p = torch.where(m.any(-1, keepdim=True), p, torch.zeros_like(p))
    return torch.einsum("bnhl,blhd->bnhd", p, v.to(ad).repeat_interleave(g, 2)).to(q.dtype)
