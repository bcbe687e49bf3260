"""Public entry point of selected attention: checks, dispatch to Triton or the reference."""

from __future__ import annotations

import torch

from lc_kernels._common import (
    check_cu_seqlens,
    check_qkv,
    default_scale,
    resolve_backend,
    token_positions,
)
from lc_kernels.selected_attention.reference import selected_attention_reference

ORDERS = ("auto", "fsa", "nsa")


def check_block_indices(
    block_indices: torch.Tensor, q: torch.Tensor, hkv: int, block_size: int, cu: torch.Tensor
) -> None:
    """Raise on a bad ``block_indices`` tensor (shape, dtype, device, range, causality)."""
    b, t = q.shape[:2]
    if not isinstance(block_indices, torch.Tensor):
        raise TypeError("block_indices must be a torch.Tensor")
    if block_indices.dtype not in (torch.int16, torch.int32, torch.int64):
        raise TypeError(f"block_indices must be an integer tensor, got {block_indices.dtype}")
    if block_indices.dim() != 4 or tuple(block_indices.shape[:3]) != (b, t, hkv):
        raise ValueError(
            f"block_indices must have shape [batch={b}, seq={t}, kv_heads={hkv}, S], "
            f"got {tuple(block_indices.shape)}"
        )
    if block_indices.shape[3] == 0:
        raise ValueError("block_indices needs at least one slot (S >= 1)")
    if block_indices.device != q.device:
        raise ValueError(f"block_indices is on {block_indices.device}, q on {q.device}")
    if not block_indices.is_contiguous():
        raise ValueError("block_indices must be contiguous (call .contiguous() first)")
    if block_indices.numel() == 0:
        return
    _, pos = token_positions(cu, t)
    own = (pos // block_size).view(1, t, 1, 1)
    future = block_indices > own
    if not bool((future | (block_indices < -1)).any()):  # the one host read of a good call
        return
    low = int(block_indices.min())
    if low < -1:
        raise ValueError(f"block_indices has {low}; allowed are -1 (unused) and block ids >= 0")
    if bool(future.any()):
        bi, ti, hi, si = (int(x) for x in torch.nonzero(future)[0])
        raise ValueError(
            f"block_indices[{bi}, {ti}, {hi}, {si}] = {int(block_indices[bi, ti, hi, si])} points "
            f"to a future block or past the end: the token sits in block {int(own[0, ti, 0, 0])} "
            f"of its sequence (block_size={block_size}); causal selection allows ids <= that"
        )


def selected_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_indices: torch.Tensor,
    block_size: int = 64,
    scale: float | None = None,
    cu_seqlens: torch.Tensor | None = None,
    backend: str = "auto",
    order: str = "auto",
) -> torch.Tensor:
    """Causal attention of each query token over the key/value blocks it selected.

    Query ``t`` of KV head ``h`` attends to keys ``s <= t`` whose block ``s // block_size``
    is listed in ``block_indices[b, t, h]``; all query heads of a GQA group share the
    selection. Repeated ids count once and ``-1`` marks an unused slot; a token that
    selected nothing gets a zero output.

    Args:
        q: ``[B, T, HQ, D]`` queries (float16, bfloat16, float32; float64 on the torch backend).
        k: ``[B, T, H_kv, D]`` keys; ``HQ`` must be a multiple of ``H_kv`` (group size G).
        v: ``[B, T, H_kv, D]`` values.
        block_indices: ``[B, T, H_kv, S]`` integer block ids; with ``cu_seqlens`` they count
            from each sequence's start. Ids must be ``-1`` or ``<= t // block_size``.
        block_size: tokens per key/value block; the Triton kernels need a power of two >= 16
            (``auto`` uses the reference for other sizes).
        scale: softmax scale, default ``1 / sqrt(D)``.
        cu_seqlens: optional ``[N + 1]`` offsets of packed sequences (``B`` must be 1).
        backend: ``"auto"`` (Triton on CUDA, reference elsewhere), ``"triton"``, ``"torch"``.
        order: Triton loop order: ``"fsa"`` (outer loop over KV blocks, good for G <= 8),
            ``"nsa"`` (outer loop over tokens, query heads padded to 16), or ``"auto"``
            (FSA for G <= 8, else NSA).

    Returns:
        ``[B, T, HQ, D]`` attention output in ``q.dtype``.

    Example:
        >>> import torch
        >>> from lc_kernels import selected_attention
        >>> q = torch.randn(1, 128, 4, 32); k = torch.randn(1, 128, 2, 32); v = torch.randn_like(k)
        >>> t = torch.arange(128).view(1, 128, 1, 1)
        >>> idx = torch.cat([torch.zeros_like(t), t // 64], -1).expand(1, 128, 2, 2).contiguous()
        >>> selected_attention(q, k, v, idx, block_size=64).shape
        torch.Size([1, 128, 4, 32])
    """
    b, t, hq, hkv, d = check_qkv(q, k, v)
    if not isinstance(block_size, int) or block_size <= 0:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    if order not in ORDERS:
        raise ValueError(f"order={order!r} is not one of {ORDERS}")
    sc = default_scale(scale, d)
    cu = check_cu_seqlens(cu_seqlens, b, t, q.device)
    check_block_indices(block_indices, q, hkv, block_size, cu if cu_seqlens is not None else cu[:2])
    kernel_ok = block_size >= 16 and not block_size & (block_size - 1)
    if backend == "triton" and not kernel_ok:
        raise ValueError(
            f"the Triton kernels need block_size a power of two >= 16, got {block_size}"
        )
    chosen = resolve_backend(backend, q.device, q.dtype)
    if chosen == "torch" or not kernel_ok:  # auto falls back to the reference for other sizes
        return selected_attention_reference(q, k, v, block_indices, block_size, sc, cu_seqlens)
    from lc_kernels.selected_attention.function import (
        SelectedAttentionFunction,
        dedup_indices,
        num_global_blocks,
    )

    g = hq // hkv
    use = order if order != "auto" else ("fsa" if g <= 8 else "nsa")
    num_blocks = None  # sizes the FSA plan; known on the host without cu_seqlens
    if use == "fsa":
        num_blocks = (
            b * -(-t // block_size) if cu_seqlens is None else num_global_blocks(cu, block_size)
        )
    idx = dedup_indices(block_indices.reshape(b * t, hkv, -1).to(torch.int32)).contiguous()
    out = SelectedAttentionFunction.apply(
        q.reshape(b * t, hq, d),
        k.reshape(b * t, hkv, d),
        v.reshape(b * t, hkv, d),
        idx,
        cu,
        block_size,
        sc,
        use,
        num_blocks,
    )
    return out.view(b, t, hq, d)
