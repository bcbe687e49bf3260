"""Causal sliding-window attention computed chunk by chunk with PyTorch SDPA.

Query ``t`` attends to keys ``t - window < s <= t``. Queries are processed in chunks of
``max(window, 256)``; each chunk only sees the keys of its band, so memory is
``O(T * window)`` instead of ``O(T^2)``. SDPA picks the fused kernel on GPU.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F

from lc_kernels._common import (
    acc_dtype,
    check_cu_seqlens,
    check_qkv,
    default_scale,
    zeros_output,
)


def _band(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, scale: float
) -> torch.Tensor:
    t, hq = q.shape[1], q.shape[2]
    g = hq // k.shape[2]
    ad = acc_dtype(q.dtype) if q.device.type == "cpu" else q.dtype
    chunk = max(window, 256)
    outs = []
    for a in range(0, t, chunk):
        e = min(t, a + chunk)
        ks = max(0, a - window + 1)
        qi = torch.arange(a, e, device=q.device)[:, None]
        ki = torch.arange(ks, e, device=q.device)[None, :]
        mask = (ki <= qi) & (ki > qi - window)
        o = F.scaled_dot_product_attention(
            q[:, a:e].to(ad).transpose(1, 2),
            k[:, ks:e].to(ad).repeat_interleave(g, 2).transpose(1, 2),
            v[:, ks:e].to(ad).repeat_interleave(g, 2).transpose(1, 2),
            attn_mask=mask,
            scale=scale,
        )
        outs.append(o.transpose(1, 2))
    return torch.cat(outs, 1).to(q.dtype) if outs else torch.zeros_like(q)


def sliding_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int = 512,
    scale: float | None = None,
    cu_seqlens: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention restricted to the last ``window`` tokens (the token itself included).

    Args:
        q: ``[B, T, HQ, D]`` queries.
        k: ``[B, T, H_kv, D]`` keys; ``HQ`` a multiple of ``H_kv``.
        v: ``[B, T, H_kv, D]`` values.
        window: number of most recent keys each query sees (w = 512 in NSA).
        scale: softmax scale, default ``1 / sqrt(D)``.
        cu_seqlens: optional ``[N + 1]`` offsets of packed sequences (``B == 1``).

    Returns:
        ``[B, T, HQ, D]`` in ``q.dtype``.

    Example:
        >>> import torch
        >>> q = torch.randn(1, 50, 2, 8); k = torch.randn(1, 50, 1, 8)
        >>> sliding_window_attention(q, k, k, window=16).shape
        torch.Size([1, 50, 2, 8])
    """
    b, t, _, _, d = check_qkv(q, k, v)
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an int >= 1, got {window!r}")
    sc = default_scale(scale, d)
    if q.numel() == 0:  # empty batch or no tokens: empty output, zero/empty gradients
        if cu_seqlens is not None:
            check_cu_seqlens(cu_seqlens, b, t, q.device)
        return zeros_output(tuple(q.shape), q, k, v)
    if cu_seqlens is None:
        return _band(q, k, v, window, sc)
    cu = check_cu_seqlens(cu_seqlens, b, t, q.device).tolist()
    out = torch.zeros_like(q)
    for a, e in itertools.pairwise(cu):
        if e > a:
            out[:, a:e] = _band(q[:, a:e], k[:, a:e], v[:, a:e], window, sc)
    return out
