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

from lc_kernels._common import acc_dtype
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


class _ChunkAttention(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        past: PagedKV | None,
        scale: float,
    ) -> torch.Tensor:
        t, hkv = q.shape[1], k.shape[2]
        qg = _grouped(q, hkv)
        kn, vn = (x.permute(0, 2, 1, 3).to(qg.dtype) for x in (k, v))
        bias = _causal_bias(t, q.shape[2] // hkv, q.device, qg.dtype)

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
        out = acc / l_sum
        lse = m + torch.log(l_sum)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.past, ctx.scale = past, scale
        return _ungrouped(out, t).to(q.dtype)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, out, lse = ctx.saved_tensors
        past, scale = ctx.past, ctx.scale
        t, hkv = q.shape[1], k.shape[2]
        qg = _grouped(q, hkv)
        do = _grouped(grad_out, hkv)
        kn, vn = (x.permute(0, 2, 1, 3).to(qg.dtype) for x in (k, v))
        delta = (do * out).sum(-1, keepdim=True)

        def block_grads(
            s: torch.Tensor, kb: torch.Tensor, vb: torch.Tensor
        ) -> tuple[torch.Tensor, ...]:
            p = torch.exp(s - lse)
            ds = p * (do @ vb.transpose(-1, -2) - delta)
            return ds @ kb * scale, ds.transpose(-1, -2) @ qg * scale, p.transpose(-1, -2) @ do

        bias = _causal_bias(t, q.shape[2] // hkv, q.device, qg.dtype)
        dq, dk, dv = block_grads(qg @ kn.transpose(-1, -2) * scale + bias, kn, vn)
        if past is not None and past.k_grad_pages is not None and past.v_grad_pages is not None:
            for start, kb, vb in past.blocks(q.device, qg.dtype):
                dq_b, dk_b, dv_b = block_grads(qg @ kb.transpose(-1, -2) * scale, kb, vb)
                dq += dq_b
                paged_scatter(
                    past.k_grad_pages,
                    past.table,
                    start,
                    dk_b.to(past.k_grad_pages.device),
                    accumulate=True,
                )
                paged_scatter(
                    past.v_grad_pages,
                    past.table,
                    start,
                    dv_b.to(past.v_grad_pages.device),
                    accumulate=True,
                )
        elif past is not None:
            for _, kb, _vb in past.blocks(q.device, qg.dtype):
                dq += block_grads(qg @ kb.transpose(-1, -2) * scale, kb, _vb)[0]
        return (
            _ungrouped(dq, t).to(q.dtype),
            dk.permute(0, 2, 1, 3).to(k.dtype),
            dv.permute(0, 2, 1, 3).to(v.dtype),
            None,
            None,
        )


def paged_chunk_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    past: PagedKV | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """Causal attention of a chunk over ``past`` tokens (paged) and itself.

    Args:
        q: ``[B, T, H, D]`` queries of the chunk's tokens.
        k: ``[B, T, H_kv, D]`` keys of the chunk's tokens; ``H % H_kv == 0``.
        v: ``[B, T, H_kv, D]`` values of the chunk's tokens.
        past: the earlier tokens' keys/values in pages, or ``None`` for the first chunk.
        scale: softmax scale, ``1/sqrt(D)`` by default.

    Returns:
        ``[B, T, H, D]`` output, equal to causal softmax attention over the concatenation
        ``[past, chunk]``. Backward returns gradients for ``q, k, v`` and adds the past
        tokens' key/value gradients into ``past.k_grad_pages`` / ``past.v_grad_pages``.

    Example:
        >>> q = torch.randn(1, 5, 4, 8); k = v = torch.randn(1, 5, 2, 8)
        >>> paged_chunk_attention(q, k, v).shape
        torch.Size([1, 5, 4, 8])
    """
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
    if past is not None:
        layout = (*tuple(past.k_pages.shape[1:3]), past.k_pages.shape[4])
        if layout != (q.shape[0], k.shape[2], q.shape[3]):
            raise ValueError(
                f"past pages hold [batch, kv_heads, head_dim]={layout}, chunk has "
                f"{(q.shape[0], k.shape[2], q.shape[3])}"
            )
        if past.length == 0:
            past = None
    return _ChunkAttention.apply(
        q, k, v, past, scale if scale is not None else 1 / math.sqrt(q.shape[3])
    )
