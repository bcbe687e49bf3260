"""Causal attention of one chunk over a paged past, with gradients into gradient pages.

This is the attention that chunk-recurrent training needs: the chunk's own keys and
values are ordinary autograd tensors, while the keys and values of earlier tokens sit in
pages and are never part of the autograd graph. The backward pass *adds* the gradient
with respect to those earlier keys and values into gradient pages, in place, so the
caller can hand it back to the chunk that produced them.

The past is processed in blocks of ``block_tokens`` with an online softmax (as in
FlashAttention), so peak memory is ``O(chunk x block)`` whatever the past length.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lc_kernels._common import acc_dtype, resolve_backend
from lc_kernels.backend import Backend
from lc_kernels.paged.ops import paged_gather, paged_scatter


@dataclass
class PagedKV:
    """Keys and values of the ``length`` tokens before the chunk, stored in pages.

    Attributes:
        k_pages: ``[num_pages, batch, kv_heads, page_size, head_dim]`` key storage.
        v_pages: value storage of the same layout.
        table: physical page ids of the sequence, in order.
        length: number of past tokens.
        k_grad_pages: storage of the same layout that receives ``dLoss/dK`` of the past
            tokens in backward (``None``: the past is treated as a constant).
        v_grad_pages: the same for ``dLoss/dV``.
        block_tokens: past tokens processed per block (a multiple of the page size is best).
    """

    k_pages: torch.Tensor
    v_pages: torch.Tensor
    table: Sequence[int] | torch.Tensor
    length: int
    k_grad_pages: torch.Tensor | None = None
    v_grad_pages: torch.Tensor | None = None
    block_tokens: int = 1024

    def blocks(
        self, device: torch.device, dtype: torch.dtype
    ) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
        """Yield ``(start, k_block, v_block)`` with blocks moved to ``device`` as ``dtype``."""
        for start in range(0, self.length, self.block_tokens):
            end = min(start + self.block_tokens, self.length)
            k = paged_gather(self.k_pages, self.table, start, end)
            v = paged_gather(self.v_pages, self.table, start, end)
            yield (
                start,
                k.to(device, dtype, non_blocking=True),
                v.to(device, dtype, non_blocking=True),
            )


def _grouped(q: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """``[B, T, H, D] -> [B, Hkv, G*T, D]`` in the accumulation dtype, rows ordered
    (group member, token)."""
    b, t, h, d = q.shape
    return q.permute(0, 2, 1, 3).reshape(b, kv_heads, (h // kv_heads) * t, d).to(acc_dtype(q.dtype))


def _ungrouped(x: torch.Tensor, t: int) -> torch.Tensor:
    """Inverse of :func:`_grouped`: ``[B, Hkv, G*T, D] -> [B, T, H, D]``."""
    b, hkv, gt, d = x.shape
    return x.reshape(b, hkv * (gt // t), t, d).permute(0, 2, 1, 3)


def _causal_bias(t: int, groups: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``[G*T, T]`` additive mask: row ``r`` is query token ``r % T``."""
    i = torch.arange(t, device=device).repeat(groups)[:, None]
    j = torch.arange(t, device=device)[None, :]
    return torch.zeros(i.shape[0], t, dtype=dtype, device=device).masked_fill(j > i, float("-inf"))


def _reference_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past: PagedKV | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain-PyTorch forward: blocks of the past with an online softmax."""
    b, t, h, _ = q.shape
    hkv = k.shape[2]
    if t == 0:  # no query: empty output and log-sum-exp
        return torch.zeros_like(q), torch.zeros(b, h, 0, device=q.device, dtype=torch.float32)
    qg = _grouped(q, hkv)
    kn, vn = (x.permute(0, 2, 1, 3).to(qg.dtype) for x in (k, v))
    bias = _causal_bias(t, h // hkv, q.device, qg.dtype)
    s = qg @ kn.transpose(-1, -2) * scale + bias
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    l_sum = p.sum(-1, keepdim=True)
    acc = p @ vn
    if past is not None:
        for _, kb, vb in past.blocks(q.device, qg.dtype):
            s = qg @ kb.transpose(-1, -2) * scale
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            corr = torch.exp(m - m_new)
            l_sum = l_sum * corr + p.sum(-1, keepdim=True)
            acc = acc * corr + p @ vb
            m = m_new
    out = _ungrouped(acc / l_sum, t).to(q.dtype)
    lse = (m + torch.log(l_sum)).reshape(b, h, t).float()
    return out, lse


def _reference_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor,
    past: PagedKV | None,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Plain-PyTorch backward; adds the past's dK/dV into its gradient pages."""
    b, t, h, _ = q.shape
    hkv = k.shape[2]
    if t == 0:  # no query: nothing flows to the chunk or the past
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    qg = _grouped(q, hkv)
    do = _grouped(grad_out, hkv)
    kn, vn = (x.permute(0, 2, 1, 3).to(qg.dtype) for x in (k, v))
    delta = (do * _grouped(out, hkv)).sum(-1, keepdim=True)
    lse_g = lse.reshape(b, hkv, (h // hkv) * t, 1).to(qg.dtype)

    def block_grads(
        s: torch.Tensor, kb: torch.Tensor, vb: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        p = torch.exp(s - lse_g)
        ds = p * (do @ vb.transpose(-1, -2) - delta)
        return ds @ kb * scale, ds.transpose(-1, -2) @ qg * scale, p.transpose(-1, -2) @ do

    bias = _causal_bias(t, h // hkv, q.device, qg.dtype)
    dq, dk, dv = block_grads(qg @ kn.transpose(-1, -2) * scale + bias, kn, vn)
    if past is not None:
        write = past.k_grad_pages is not None and past.v_grad_pages is not None
        for start, kb, vb in past.blocks(q.device, qg.dtype):
            dq_b, dk_b, dv_b = block_grads(qg @ kb.transpose(-1, -2) * scale, kb, vb)
            dq += dq_b
            if write:
                assert past.k_grad_pages is not None
                assert past.v_grad_pages is not None
                for pages, grad in ((past.k_grad_pages, dk_b), (past.v_grad_pages, dv_b)):
                    paged_scatter(
                        pages, past.table, start, grad.to(pages.device), accumulate=True,
                        backend="torch",
                    )  # fmt: skip
    return (
        _ungrouped(dq, t).to(q.dtype),
        dk.permute(0, 2, 1, 3).to(k.dtype),
        dv.permute(0, 2, 1, 3).to(v.dtype),
    )


def _check(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past: PagedKV | None
) -> PagedKV | None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be [batch, seq, heads, head_dim]")
    if k.shape != v.shape or q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(
            f"shape mismatch: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.shape[2] % k.shape[2]:
        raise ValueError(
            f"query heads ({q.shape[2]}) must be a multiple of kv heads ({k.shape[2]})"
        )
    if q.dtype != k.dtype or q.dtype != v.dtype or q.device != k.device or q.device != v.device:
        raise ValueError("q, k, v must share a dtype and a device")
    if past is None:
        return None
    layout = (*tuple(past.k_pages.shape[1:3]), past.k_pages.shape[4])
    if layout != (q.shape[0], k.shape[2], q.shape[3]):
        raise ValueError(
            f"past pages hold [batch, kv_heads, head_dim]={layout}, chunk has "
            f"{(q.shape[0], k.shape[2], q.shape[3])}"
        )
    storages = [past.k_pages, past.v_pages]
    if past.k_grad_pages is not None or past.v_grad_pages is not None:
        if past.k_grad_pages is None or past.v_grad_pages is None:
            raise ValueError("give both k_grad_pages and v_grad_pages, or neither")
        storages += [past.k_grad_pages, past.v_grad_pages]
    for s in storages[1:]:
        if s.shape != past.k_pages.shape or s.device != past.k_pages.device:
            raise ValueError(
                f"all page storages must match k_pages {tuple(past.k_pages.shape)} on "
                f"{past.k_pages.device}, got {tuple(s.shape)} on {s.device}"
            )
    if past.length < 0:
        raise ValueError(f"past.length must be >= 0, got {past.length}")
    return past if past.length > 0 else None


def _use_triton(q: torch.Tensor, past: PagedKV | None, backend: Backend | str) -> bool:
    """Triton needs the pages where the queries are; ``auto`` falls back to streaming
    blocks through the reference when they are elsewhere (e.g. host pages)."""
    choice = resolve_backend(backend, q.device, q.dtype)
    if choice != "triton":
        return False
    if past is not None and past.k_pages.device != q.device:
        if backend == "triton":
            raise ValueError(
                f"backend='triton' needs the pages on {q.device}, they are on "
                f"{past.k_pages.device}; stage them first or use backend='torch'"
            )
        return False
    return True


def _device_table(past: PagedKV, device: torch.device) -> torch.Tensor:
    pages = -(-past.length // past.k_pages.shape[3])
    table = torch.as_tensor(past.table, device=device).reshape(-1).to(torch.int32)
    if table.numel() < pages:
        raise ValueError(
            f"{past.length} past tokens need {pages} pages but the table has {table.numel()}"
        )
    return table.contiguous()


def paged_chunk_attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    past: PagedKV | None = None,
    scale: float | None = None,
    backend: Backend | str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward of :func:`paged_chunk_attention` without autograd.

    Args:
        q: ``[B, T, H, D]`` queries of the chunk's tokens.
        k: ``[B, T, H_kv, D]`` keys of the chunk's tokens.
        v: ``[B, T, H_kv, D]`` values of the chunk's tokens.
        past: the earlier tokens' keys/values in pages, or ``None``.
        scale: softmax scale, ``1/sqrt(D)`` by default.
        backend: ``"auto"`` (Triton on CUDA when the pages are on the same device),
            ``"triton"`` or ``"torch"``.

    Returns:
        ``(out [B, T, H, D], lse [B, H, T])``: the output in ``q``'s dtype and the fp32
        log-sum-exp of every query's scores, which the backward needs.

    Example:
        >>> q = torch.randn(1, 5, 4, 8); k = v = torch.randn(1, 5, 2, 8)
        >>> out, lse = paged_chunk_attention_forward(q, k, v)
        >>> lse.shape
        torch.Size([1, 4, 5])
    """
    past = _check(q, k, v, past)
    scale = 1 / math.sqrt(q.shape[3]) if scale is None else scale
    if _use_triton(q, past, backend):
        from lc_kernels.paged.triton import chunk_attention_forward_triton

        if past is None:
            empty = torch.empty(
                1, *k.shape[:1], k.shape[2], 1, k.shape[3], dtype=q.dtype, device=q.device
            )
            return chunk_attention_forward_triton(
                q, k, v, empty, empty, torch.zeros(1, dtype=torch.int32, device=q.device), 0, scale
            )
        return chunk_attention_forward_triton(
            q, k, v, past.k_pages, past.v_pages, _device_table(past, q.device), past.length, scale
        )
    return _reference_forward(q, k, v, past, scale)


def paged_chunk_attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor,
    past: PagedKV | None = None,
    scale: float | None = None,
    backend: Backend | str = "auto",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Backward of :func:`paged_chunk_attention`.

    Args:
        q: ``[B, T, H, D]`` queries, as given to the forward.
        k: ``[B, T, H_kv, D]`` the chunk's keys.
        v: ``[B, T, H_kv, D]`` the chunk's values.
        out: ``[B, T, H, D]`` the forward's output.
        lse: ``[B, H, T]`` the forward's log-sum-exp.
        grad_out: ``[B, T, H, D]`` gradient of the loss with respect to ``out``.
        past: the same past as in the forward (its pages may have moved, e.g. been staged
            again from host memory, but must hold the same values).
        scale: softmax scale, ``1/sqrt(D)`` by default.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        ``(dq, dk, dv)`` of the chunk. The past tokens' key/value gradients are *added*
        into ``past.k_grad_pages`` / ``past.v_grad_pages`` (when given).
    """
    past = _check(q, k, v, past)
    if out.shape != q.shape or grad_out.shape != q.shape:
        raise ValueError(
            f"out {tuple(out.shape)} and grad_out {tuple(grad_out.shape)} must match q "
            f"{tuple(q.shape)}"
        )
    if lse.shape != (q.shape[0], q.shape[2], q.shape[1]):
        raise ValueError(f"lse must be [B, H, T]={(q.shape[0], q.shape[2], q.shape[1])}")
    scale = 1 / math.sqrt(q.shape[3]) if scale is None else scale
    if _use_triton(q, past, backend):
        from lc_kernels.paged.triton import chunk_attention_backward_triton

        if past is None:
            empty = torch.empty(
                1, *k.shape[:1], k.shape[2], 1, k.shape[3], dtype=q.dtype, device=q.device
            )
            zero = torch.zeros(1, dtype=torch.int32, device=q.device)
            return chunk_attention_backward_triton(
                q, k, v, out, lse, grad_out, empty, empty, zero, 0, None, None, scale
            )
        return chunk_attention_backward_triton(
            q, k, v, out, lse, grad_out, past.k_pages, past.v_pages,
            _device_table(past, q.device), past.length, past.k_grad_pages, past.v_grad_pages,
            scale,
        )  # fmt: skip
    return _reference_backward(q, k, v, out, lse, grad_out, past, scale)


class _ChunkAttention(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        past: PagedKV | None,
        scale: float,
        backend: Backend | str,
    ) -> torch.Tensor:
        out, lse = paged_chunk_attention_forward(q, k, v, past, scale, backend)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.past, ctx.scale, ctx.backend = past, scale, backend
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = paged_chunk_attention_backward(
            q, k, v, out, lse, grad_out, ctx.past, ctx.scale, ctx.backend
        )
        return dq, dk, dv, None, None, None


def paged_chunk_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    past: PagedKV | None = None,
    scale: float | None = None,
    backend: Backend | str = "auto",
) -> torch.Tensor:
    """Causal attention of a chunk over ``past`` tokens (paged) and itself.

    Args:
        q: ``[B, T, H, D]`` queries of the chunk's tokens.
        k: ``[B, T, H_kv, D]`` keys of the chunk's tokens; ``H % H_kv == 0``.
        v: ``[B, T, H_kv, D]`` values of the chunk's tokens.
        past: the earlier tokens' keys/values in pages, or ``None`` for the first chunk.
        scale: softmax scale, ``1/sqrt(D)`` by default.
        backend: ``"auto"`` (the Triton kernels on CUDA when the pages sit on the queries'
            device, else the PyTorch reference, which streams blocks of pages from
            wherever they are), ``"triton"`` or ``"torch"``.

    Returns:
        ``[B, T, H, D]`` output, equal to causal softmax attention over the concatenation
        ``[past, chunk]``. Backward returns gradients for ``q, k, v`` and adds the past
        tokens' key/value gradients into ``past.k_grad_pages`` / ``past.v_grad_pages``.

    Example:
        >>> q = torch.randn(1, 5, 4, 8); k = v = torch.randn(1, 5, 2, 8)
        >>> paged_chunk_attention(q, k, v).shape
        torch.Size([1, 5, 4, 8])
    """
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    return _ChunkAttention.apply(q, k, v, past, scale, backend)
