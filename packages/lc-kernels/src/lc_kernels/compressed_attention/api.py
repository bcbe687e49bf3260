"""Public compression-branch ops: compressed attention and top-k block selection."""

from __future__ import annotations

from typing import overload

import torch

from lc_kernels._common import check_qkv, default_scale, resolve_backend
from lc_kernels.backend import Backend
from lc_kernels.block_select.reference import topk_blocks_from_scores
from lc_kernels.compressed_attention.reference import (
    block_scores_reference,
    compressed_attention_reference,
    group_block_scores_reference,
    num_compressed,
)
from lc_kernels.renames import renamed_params, spelled


def _check_ints(*fields: tuple[str, object, int]) -> None:
    """Raise ``ValueError`` unless every ``(name, value, lowest)`` holds an int >= lowest."""
    for name, val, lo in fields:
        if not isinstance(val, int) or val < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {val!r}")


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
    for name, x in (("q", q), ("k_cmp", k_cmp), ("v_cmp", v_cmp)):
        if x is not None and not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    v = k_cmp if v_cmp is None else v_cmp
    if v_cmp is not None:  # the values must match the keys they are paired with
        if v_cmp.dim() != 4 or v_cmp.shape != k_cmp.shape:
            raise ValueError(
                f"v_cmp {tuple(v_cmp.shape)} must have the shape of k_cmp {tuple(k_cmp.shape)}: "
                "[batch, compressed, kv_heads, head_dim], batch as in q"
            )
        if v_cmp.dtype != k_cmp.dtype:
            raise TypeError(f"v_cmp has dtype {v_cmp.dtype}, k_cmp {k_cmp.dtype}: they must match")
        if v_cmp.device != k_cmp.device:
            raise ValueError(f"v_cmp is on {v_cmp.device}, k_cmp on {k_cmp.device}")
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
    if k_cmp.shape[0] != b:
        raise ValueError(f"k_cmp batch {k_cmp.shape[0]} != q batch {b}")
    # reuse the q/k/v checks with the compressed length aligned to T
    check_qkv(
        q,
        k_cmp.new_empty(b, t, *k_cmp.shape[2:]),
        v.new_empty(v.shape[0], t, *v.shape[2:]),
    )


@overload
def compressed_attention(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    v_cmp: torch.Tensor,
    kernel_size: int = ...,
    stride: int = ...,
    scale: float | None = ...,
    topk: None = ...,
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
    topk: int,
    block_size: int = ...,
    init_blocks: int = ...,
    local_blocks: int = ...,
) -> tuple[torch.Tensor, torch.Tensor]: ...


@renamed_params({"top_k": "topk"}, "lc-kernels 0.10")
def compressed_attention(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    v_cmp: torch.Tensor,
    kernel_size: int = 32,
    stride: int = 16,
    scale: float | None = None,
    topk: int | None = None,
    block_size: int = 64,
    init_blocks: int = 1,
    local_blocks: int = 2,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Causal attention of every query to the compressed keys it may see (NSA's compression branch).

    With ``topk`` it also selects blocks for the selection branch (see
    [select_blocks][lc_kernels.compressed_attention.select_blocks]) and returns both.

    Args:
        q: ``[B, T, HQ, D]`` queries.
        k_cmp: ``[B, C, H_kv, D]`` compressed keys, ``C = (T - kernel_size) // stride + 1``.
        v_cmp: ``[B, C, H_kv, D]`` compressed values.
        kernel_size: tokens summarised by one compressed token (l = 32).
        stride: distance between compressed spans (d = 16).
        scale: softmax scale, default ``1 / sqrt(D)``.
        topk: if given, also return ``topk`` selected blocks per token and KV head
            (``top_k`` until 0.7: warns, removed in 0.10).
        block_size: selection block length (with ``topk``).
        init_blocks: initial blocks always selected (with ``topk``).
        local_blocks: most recent blocks always selected (with ``topk``).

    Returns:
        ``[B, T, HQ, D]``; tokens before the first complete span get 0. With ``topk``:
        ``(output, block_indices [B, T, H_kv, topk] int32)``.

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
    if topk is None:
        return o
    idx = select_blocks(
        q, k_cmp, block_size, topk, kernel_size, stride, init_blocks, local_blocks, scale
    )
    return o, idx


@renamed_params({"top_k": "topk"}, "lc-kernels 0.10")
def select_blocks(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    block_size: int = 64,
    topk: int = 16,
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
        topk: number of selected blocks per token (n = 16; ``top_k`` until 0.7: warns,
            removed in 0.10).
        kernel_size: compression span (l = 32).
        stride: compression stride (d = 16).
        init_blocks: blocks always selected at the start (1).
        local_blocks: most recent blocks always selected (2).
        scale: softmax scale, default ``1 / sqrt(D)``.

    Returns:
        ``[B, T, H_kv, topk]`` int32 block ids, ``-1`` in unfilled slots; ready for
        [selected_attention][lc_kernels.selected_attention.selected_attention].

    Example:
        >>> import torch
        >>> from lc_kernels import mean_pool_compress, select_blocks
        >>> q = torch.randn(1, 256, 4, 16); k = torch.randn(1, 256, 2, 16)
        >>> select_blocks(q, mean_pool_compress(k), block_size=64, topk=3).shape
        torch.Size([1, 256, 2, 3])
    """
    _check_cmp(q, k_cmp, None, kernel_size, stride)
    _check_ints(
        ("block_size", block_size, 1),
        (spelled("topk"), topk, 1),
        ("init_blocks", init_blocks, 0),
        ("local_blocks", local_blocks, 0),
    )
    if block_size % stride:
        raise ValueError(f"block_size={block_size} must be a multiple of stride={stride}")
    sc = default_scale(scale, q.shape[-1])
    scores = block_scores_reference(q, k_cmp, kernel_size, stride, block_size, sc)
    return topk_blocks_from_scores(scores, block_size, topk, init_blocks, local_blocks)


def group_block_scores(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    start: int = 0,
    kv_len: int | None = None,
    kernel_size: int = 32,
    stride: int = 16,
    block_size: int = 64,
    query_block: int = 1,
    scale: float | None = None,
    backend: Backend | str = "auto",
) -> torch.Tensor:
    """Block scores of InfLLM-v2 (stage 1 of DSSA), shared by position-aligned query groups.

    Each query's softmax over the compressed keys it can see (span ending at or before
    its position) is summed over the query heads of its KV head and over the queries of
    its group (positions ``[m * query_block, (m + 1) * query_block)``), then max-pooled
    onto selection blocks (block ``j`` takes the largest sum among the spans overlapping
    it). On CUDA one fused Triton pass computes the log-sum-exp of every row and a second
    forms the pooled sums tile by tile, without writing the ``[T * HQ, C]`` probabilities.

    Args:
        q: ``[B, T, HQ, D]`` queries at key positions ``start .. start + T - 1``.
        k_cmp: ``[B, C, H_kv, D]`` mean-pooled keys of the ``kv_len`` keys
            (``C = num_compressed(kv_len, kernel_size, stride)``).
        start: key position of the first query (``start + T <= kv_len``).
        kv_len: number of keys S (default ``start + T``).
        kernel_size: span of a compressed key (l = 32).
        stride: distance between spans (d = 16); divides ``block_size``.
        block_size: selection block length (64).
        query_block: queries per group (1: per-query scores).
        scale: softmax scale, default ``1 / sqrt(D)``.
        backend: ``"auto"`` (Triton on CUDA), ``"triton"`` or ``"torch"``.

    Returns:
        ``[B, NG, H_kv, NB]`` fp32, ``NB = ceil(kv_len / block_size)``, one row per group
        met by the queries (``NG = (start + T - 1) // query_block - start // query_block + 1``,
        0 when ``T == 0``). Empty inputs (``B == 0`` or ``T == 0``) give an all-zero
        (possibly empty) output on every backend.

    Example:
        >>> import torch
        >>> from lc_kernels import mean_pool_compress
        >>> from lc_kernels.compressed_attention import group_block_scores
        >>> q = torch.randn(1, 128, 4, 16); k = torch.randn(1, 256, 2, 16)
        >>> kc = mean_pool_compress(k)
        >>> group_block_scores(q, kc, start=128, kv_len=256, query_block=64).shape
        torch.Size([1, 2, 2, 4])
    """
    if q.dim() != 4 or k_cmp.dim() != 4:
        raise ValueError(
            f"q [B, T, HQ, D] and k_cmp [B, C, H_kv, D] must be 4-D, got "
            f"{tuple(q.shape)} and {tuple(k_cmp.shape)}"
        )
    (b, t, hq, d), (bk, c, hkv, dk) = q.shape, k_cmp.shape
    kv_len = start + t if kv_len is None else kv_len
    _check_ints(
        ("start", start, 0),
        ("kv_len", kv_len, 0),
        ("kernel_size", kernel_size, 1),
        ("stride", stride, 1),
        ("block_size", block_size, 1),
        ("query_block", query_block, 1),
    )
    if stride > kernel_size or block_size % stride:
        raise ValueError(
            f"need stride <= kernel_size and block_size a multiple of stride, got "
            f"kernel_size={kernel_size}, stride={stride}, block_size={block_size}"
        )
    if bk != b or dk != d or hq % hkv:
        raise ValueError(
            f"q {tuple(q.shape)} and k_cmp {tuple(k_cmp.shape)}: need the same B and D "
            "and HQ a multiple of H_kv"
        )
    if start + t > kv_len:
        raise ValueError(f"queries at positions {start}..{start + t - 1} pass kv_len={kv_len}")
    if c != num_compressed(kv_len, kernel_size, stride):
        raise ValueError(
            f"k_cmp has {c} compressed keys; kv_len={kv_len}, kernel_size={kernel_size}, "
            f"stride={stride} give {num_compressed(kv_len, kernel_size, stride)}"
        )
    if q.dtype != k_cmp.dtype or q.device != k_cmp.device:
        raise ValueError(
            f"q and k_cmp must share a dtype and a device, got {q.dtype} on {q.device} "
            f"and {k_cmp.dtype} on {k_cmp.device}"
        )
    sc = default_scale(scale, q.shape[-1])
    args = (start, kv_len, kernel_size, stride, block_size, query_block, sc)
    if resolve_backend(backend, q.device, q.dtype) == "triton":
        from lc_kernels.compressed_attention.triton import group_block_scores_triton

        return group_block_scores_triton(q, k_cmp, *args)
    return group_block_scores_reference(q, k_cmp, *args)
