"""Public entry point of selected attention: checks, dispatch to Triton or the reference."""

from __future__ import annotations

import torch

from lc_kernels._common import (
    check_cu_seqlens,
    check_kv_valid,
    check_qkv,
    default_scale,
    resolve_backend,
    token_positions,
    zeros_output,
)
from lc_kernels.backend import Backend
from lc_kernels.selected_attention.reference import selected_attention_reference

ORDERS = ("auto", "fsa", "nsa")


def check_block_indices(
    block_indices: torch.Tensor,
    q: torch.Tensor,
    hkv: int,
    block_size: int,
    cu: torch.Tensor | None,
    num_keys: int | None = None,
    check: bool = True,
) -> None:
    """Raise on a bad ``block_indices`` tensor (shape, dtype, device, range, causality).

    Args:
        block_indices: ``[B, Tq, H_kv, S]`` integer block ids.
        q: ``[B, Tq, HQ, D]`` queries (for the shape and device).
        hkv: number of key/value heads.
        block_size: tokens per key/value block.
        cu: int64 offsets of packed sequences (``Tq == Tk``), or ``None`` for a plain batch.
        num_keys: Tk (``Tq`` when not given); query ``t`` sits at key position ``Tk - Tq + t``.
        check: also check the values (range and causality). That reads the device once
            (a host sync); ``check=False`` checks only shape, dtype and device.
    """
    b, t = q.shape[:2]
    tk = t if num_keys is None else num_keys
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
    if not check or block_indices.numel() == 0:
        return
    if cu is None:
        pos = torch.arange(t, device=q.device) + (tk - t)
    else:
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
            f"to a future block or past the end: the query sits at key position "
            f"{int(pos[ti])}, in block {int(own[0, ti, 0, 0])} of its sequence "
            f"(block_size={block_size}); causal selection allows ids <= that"
        )


def selected_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_indices: torch.Tensor,
    block_size: int = 64,
    scale: float | None = None,
    cu_seqlens: torch.Tensor | None = None,
    backend: Backend | str = "auto",
    order: str = "auto",
    kv_valid: torch.Tensor | None = None,
    check: bool = True,
) -> torch.Tensor:
    """Causal attention of each query token over the key/value blocks it selected.

    Query ``t`` of KV head ``h`` attends to keys ``s <= p(t)`` whose block
    ``s // block_size`` is listed in ``block_indices[b, t, h]``; all query heads of a GQA
    group share the selection. Repeated ids count once and ``-1`` marks an unused slot; a
    query that sees no key gets a zero output.

    There may be fewer queries than keys (decode, chunked prefill): the queries are then
    aligned to the end of the keys, so query ``t`` sits at key position
    ``p(t) = Tk - Tq + t`` (the convention of a KV cache); with ``Tq == Tk`` this is
    plain causal attention.

    Args:
        q: ``[B, Tq, HQ, D]`` queries (float16, bfloat16, float32; float64 on the torch backend).
        k: ``[B, Tk, H_kv, D]`` keys, ``Tk >= Tq``; ``HQ`` must be a multiple of ``H_kv``
            (group size G).
        v: ``[B, Tk, H_kv, D]`` values.
        block_indices: ``[B, Tq, H_kv, S]`` integer block ids; with ``cu_seqlens`` they count
            from each sequence's start. Ids must be ``-1`` or ``<= p(t) // block_size``.
        block_size: tokens per key/value block; the Triton kernels need a power of two >= 16
            (``auto`` uses the reference for other sizes).
        scale: softmax scale, default ``1 / sqrt(D)``.
        cu_seqlens: optional ``[N + 1]`` offsets of packed sequences (``B`` must be 1 and
            ``Tq == Tk``).
        backend: ``"auto"`` (Triton on CUDA, reference elsewhere), ``"triton"``, ``"torch"``.
        order: Triton loop order of the forward: ``"fsa"`` (outer loop over KV blocks, good
            for G <= 8), ``"nsa"`` (outer loop over tokens, query heads padded to 16), or
            ``"auto"`` (FSA for G <= 8, else NSA). Both share one backward without atomics.
        kv_valid: optional ``[B, Tk]`` bool key padding mask, True for a real key and False
            for padding; padded keys are never attended (a query left with no key gets 0).
            Note the sense: the opposite of ``nn.MultiheadAttention``'s
            ``key_padding_mask``, the same as a Hugging Face ``attention_mask``.
        check: check the values of ``block_indices`` and ``cu_seqlens`` (ranges,
            causality). These checks read the device (one host sync per call);
            ``check=False`` skips them, so a valid call makes no data-dependent host read
            and the torch backend traces under ``torch.compile(fullgraph=True)``. Ids past
            the causal limit (and below -1) then count as unused slots, not as errors;
            bad ``cu_seqlens`` values give undefined results.

    Returns:
        ``[B, Tq, HQ, D]`` attention output in ``q.dtype``.

    Example:
        >>> import torch
        >>> from lc_kernels import selected_attention
        >>> q = torch.randn(1, 128, 4, 32); k = torch.randn(1, 128, 2, 32); v = torch.randn_like(k)
        >>> t = torch.arange(128).view(1, 128, 1, 1)
        >>> idx = torch.cat([torch.zeros_like(t), t // 64], -1).expand(1, 128, 2, 2).contiguous()
        >>> selected_attention(q, k, v, idx, block_size=64).shape
        torch.Size([1, 128, 4, 32])
        >>> # one decode step against a 128-token cache: the query sits at position 127
        >>> selected_attention(q[:, -1:], k, v, idx[:, -1:], block_size=64).shape
        torch.Size([1, 1, 4, 32])
    """
    b, tq, hq, hkv, d = check_qkv(q, k, v, fewer_queries=True)
    tk = k.shape[1]
    if not isinstance(block_size, int) or block_size <= 0:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    if order not in ORDERS:
        raise ValueError(f"order={order!r} is not one of {ORDERS}")
    sc = default_scale(scale, d)
    if cu_seqlens is not None and tq != tk:
        raise ValueError(
            f"with cu_seqlens queries and keys must be equally long, got Tq={tq}, Tk={tk}"
        )
    cu = check_cu_seqlens(cu_seqlens, b, tk, q.device, check=check)
    check_kv_valid(kv_valid, b, tk, q.device)
    check_block_indices(
        block_indices, q, hkv, block_size, cu if cu_seqlens is not None else None, tk, check
    )
    kernel_ok = block_size >= 16 and not block_size & (block_size - 1)
    if backend == "triton" and not kernel_ok:
        raise ValueError(
            f"the Triton kernels need block_size a power of two >= 16, got {block_size}"
        )
    chosen = resolve_backend(backend, q.device, q.dtype)
    if b == 0 or tq == 0:  # nothing to attend: an empty output, zero/empty gradients
        return zeros_output((b, tq, hq, d), q, k, v)
    if chosen == "torch" or not kernel_ok:  # auto falls back to the reference for other sizes
        return selected_attention_reference(
            q, k, v, block_indices, block_size, sc, cu_seqlens, kv_valid
        )
    from lc_kernels.selected_attention.function import (
        SelectedAttentionFunction,
        dedup_indices,
        max_global_blocks,
    )

    g = hq // hkv
    use = order if order != "auto" else ("fsa" if g <= 8 else "nsa")
    # sizes the block -> token plan from shapes alone (no read of cu_seqlens)
    num_blocks = max_global_blocks(b * tk, cu.numel() - 1, block_size)
    if cu_seqlens is None:
        num_blocks = b * -(-tk // block_size)
    cu_q = None if tq == tk else torch.arange(b + 1, device=q.device, dtype=torch.int64) * tq
    kvm = None if kv_valid is None else kv_valid.reshape(b * tk).to(torch.int8)
    idx = block_indices.reshape(b * tq, hkv, -1).to(torch.int32)
    if not check:  # unchecked ids past the causal limit become unused slots (device ops only)
        if cu_seqlens is None:
            pos = (torch.arange(tq, device=q.device) + (tk - tq)).repeat(b)
        else:
            _, pos = token_positions(cu, tq)
        own = (pos // block_size).view(b * tq, 1, 1)
        idx = torch.where((idx > own) | (idx < -1), -1, idx)
    idx = dedup_indices(idx).contiguous()
    out = SelectedAttentionFunction.apply(
        q.reshape(b * tq, hq, d),
        k.reshape(b * tk, hkv, d),
        v.reshape(b * tk, hkv, d),
        idx,
        cu,
        block_size,
        sc,
        use,
        num_blocks,
        cu_q,
        kvm,
    )
    return out.view(b, tq, hq, d)
