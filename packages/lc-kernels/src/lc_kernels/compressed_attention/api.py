"""Public compression-branch ops: compressed attention and top-k block selection."""

from __future__ import annotations

from typing import overload

import torch

from lc_kernels._common import check_qkv, default_scale
from lc_kernels.compressed_attention.reference import (
    block_scores_reference,
    compressed_attention_reference,
    topk_blocks_from_scores,
)


def _check_cmp(
    q: torch.Tensor, k_cmp: torch.Tensor, v_cmp: torch.Tensor | None, kernel_size: int, stride: int
) -> None:
    if (
        not isinstance(kernel_size, int)
        or not isinstance(stride, int)
        or kernel_size <= 0
        or stride <= 0
    ):
        raise ValueError(
            f"kernel_size and stride must be positive ints, got {kernel_size!r}, {stride!r}"
        )
    if stride > kernel_size:
        raise ValueError(
            f"stride={stride} > kernel_size={kernel_size} would leave tokens uncovered"
        )
    v = k_cmp if v_cmp is None else v_cmp
    if q.dim() != 4 or k_cmp.dim() != 4:
        raise ValueError(
            f"q and k_cmp must be 4-D [batch, seq, heads, head_dim], got {tuple(q.shape)}, {tuple(k_cmp.shape)}"
        )
    b, t = q.shape[:2]
    c = k_cmp.shape[1]
    expect = 0 if t < kernel_size else (t - kernel_size) // stride + 1
    if c != expect:
        raise ValueError(
            f"k_cmp has {c} compressed tokens; T={t}, kernel_size={kernel_size}, stride={stride} give {expect}"
        )
    # reuse the q/k/v checks with the compressed length aligned to T
    check_qkv(q, k_cmp.new_empty(b, t, *k_cmp.shape[2:]), v.new_empty(b, t, *v.shape[2:]))
    if k_cmp.shape[0] != b:
        raise ValueError(f"k_cmp batch {k_cmp.shape[0]} != q batch {b}")


@overload
def compressed_attention(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    v_cmp: torch.Tensor,
    kernel_size: int = ...,
    stride: int = ...,
    scale: float | None = ...,
    top_k: None = ...,
    block_size: int = ...,
    init_blocks: int = ...,
    local_blocks: int = ...,
) -> torch.Tensor: ...


@overload
def compressed_attention(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    v_cmp: torch.Tensor,
    kernel_size: int = ...,
    stride: int = ...,
    scale: float | None = ...,
    *,
    top_k: int,
    block_size: int = ...,
    init_blocks: int = ...,
    local_blocks: int = ...,
) -> tuple[torch.Tensor, torch.Tensor]: ...


def compressed_attention(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    v_cmp: torch.Tensor,
    kernel_size: int = 32,
    stride: int = 16,
    scale: float | None = None,
    top_k: int | None = None,
    block_size: int = 64,
    init_blocks: int = 1,
    local_blocks: int = 2,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Causal attention of every query to the compressed keys it may see (NSA's compression branch).

    With ``top_k`` it also selects blocks for the selection branch (see
    [select_blocks][lc_kernels.compressed_attention.select_blocks]) and returns both.

    Args:
        q: ``[B, T, HQ, D]`` queries.
        k_cmp: ``[B, C, H_kv, D]`` compressed keys, ``C = (T - kernel_size) // stride + 1``.
        v_cmp: ``[B, C, H_kv, D]`` compressed values.
        kernel_size: tokens summarised by one compressed token (l = 32).
        stride: distance between compressed spans (d = 16).
        scale: softmax scale, default ``1 / sqrt(D)``.
        top_k: if given, also return ``top_k`` selected blocks per token and KV head.
        block_size: selection block length (with ``top_k``).
        init_blocks: initial blocks always selected (with ``top_k``).
        local_blocks: most recent blocks always selected (with ``top_k``).

    Returns:
        ``[B, T, HQ, D]``; tokens before the first complete span get 0. With ``top_k``:
        ``(output, block_indices [B, T, H_kv, top_k] int32)``.

    Example:
        >>> import torch
        >>> from lc_kernels import compressed_attention, mean_pool_compress
        >>> q = torch.randn(1, 96, 4, 16); k = torch.randn(1, 96, 2, 16)
        >>> kc = mean_pool_compress(k, 32, 16)
        >>> compressed_attention(q, kc, kc, 32, 16).shape
        torch.Size([1, 96, 4, 16])
    """
    _check_cmp(q, k_cmp, v_cmp, kernel_size, stride)
    o, _ = compressed_attention_reference(
        q, k_cmp, v_cmp, kernel_size, stride, default_scale(scale, q.shape[-1])
    )
    if top_k is None:
        return o
    idx = select_blocks(
        q, k_cmp, block_size, top_k, kernel_size, stride, init_blocks, local_blocks, scale
    )
    return o, idx


def select_blocks(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    block_size: int = 64,
    top_k: int = 16,
    kernel_size: int = 32,
    stride: int = 16,
    init_blocks: int = 1,
    local_blocks: int = 2,
    scale: float | None = None,
) -> torch.Tensor:
    """Top-k selection blocks per token and KV head from the compressed-attention scores.

    Scores are the compressed-attention probabilities spread onto the selection blocks
    each compressed span overlaps and summed over the query heads of the GQA group, so
    every head of a group picks the same blocks. The first ``init_blocks`` and the
    ``local_blocks`` most recent blocks are forced in, future blocks excluded.

    Args:
        q: ``[B, T, HQ, D]`` queries.
        k_cmp: ``[B, C, H_kv, D]`` compressed keys.
        block_size: selection block length (l' = 64); a multiple of ``stride``.
        top_k: number of selected blocks per token (n = 16).
        kernel_size: compression span (l = 32).
        stride: compression stride (d = 16).
        init_blocks: blocks always selected at the start (1).
        local_blocks: most recent blocks always selected (2).
        scale: softmax scale, default ``1 / sqrt(D)``.

    Returns:
        ``[B, T, H_kv, top_k]`` int32 block ids, ``-1`` in unfilled slots; ready for
        [selected_attention][lc_kernels.selected_attention.selected_attention].

    Example:
        >>> import torch
        >>> from lc_kernels import mean_pool_compress, select_blocks
        >>> q = torch.randn(1, 256, 4, 16); k = torch.randn(1, 256, 2, 16)
        >>> select_blocks(q, mean_pool_compress(k), block_size=64, top_k=3).shape
        torch.Size([1, 256, 2, 3])
    """
    _check_cmp(q, k_cmp, None, kernel_size, stride)
    for name, val, lo in (
        ("block_size", block_size, 1),
        ("top_k", top_k, 1),
        ("init_blocks", init_blocks, 0),
        ("local_blocks", local_blocks, 0),
    ):
        if not isinstance(val, int) or val < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {val!r}")
    if block_size % stride:
        raise ValueError(f"block_size={block_size} must be a multiple of stride={stride}")
    sc = default_scale(scale, q.shape[-1])
    scores = block_scores_reference(q, k_cmp, kernel_size, stride, block_size, sc)
    return topk_blocks_from_scores(scores, block_size, top_k, init_blocks, local_blocks)
