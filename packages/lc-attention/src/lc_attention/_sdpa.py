"""Masked attention with grouped KV heads, shared by the layers of this package."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def masked_sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor, scale: float
) -> torch.Tensor:
    """SDPA of ``q [B, T, HQ, D]`` over ``k, v [B, S, H_kv, D]`` with ``allowed [B|1,
    1|H_kv|HQ, T, S]`` bool (True = attend); rows with nothing allowed give 0. Returns
    ``[B, T, HQ, D]`` in ``q.dtype`` (the masked path of DSSA's dense attention and of
    NSA's decoding window)."""
    g = q.shape[2] // k.shape[2]
    per_kv = allowed.shape[1] > 1 and allowed.shape[1] != q.shape[2]
    m = allowed.repeat_interleave(g, 1) if per_kv else allowed
    has = m.any(-1, keepdim=True)
    m = m | ~has  # keep rows finite; zeroed below
    o = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.repeat_interleave(g, 2).transpose(1, 2),
        v.repeat_interleave(g, 2).transpose(1, 2),
        attn_mask=m,
        scale=scale,
    )
    o = torch.where(has.expand_as(o[..., :1]), o, torch.zeros_like(o))
    return o.transpose(1, 2)
