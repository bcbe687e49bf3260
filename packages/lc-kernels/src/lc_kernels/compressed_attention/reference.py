"""Compression branch of Native Sparse Attention and top-k block selection, in PyTorch.

Compressed token ``c`` summarises keys ``[c * stride, c * stride + kernel_size)``; query
``t`` may attend to it once the whole span is in the past (``c * stride + kernel_size - 1
<= t``). Attention over compressed keys is dense (``T / stride`` keys), so it runs through
``torch.nn.functional.scaled_dot_product_attention`` with a boolean mask: on GPU that is
the fused memory-efficient kernel, on CPU fp32 math. InfLLM-v2's group block scores
(``group_block_scores_reference``) have a fused Triton version in ``triton.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lc_kernels._common import acc_dtype, zeros_output
from lc_kernels.block_select.reference import topk_blocks_from_scores  # noqa: F401 (re-export)


def num_compressed(seq_len: int, kernel_size: int, stride: int) -> int:
    """Number of compressed tokens of a sequence of ``seq_len`` tokens (0 if too short)."""
    return 0 if seq_len < kernel_size else (seq_len - kernel_size) // stride + 1


def compressed_visibility(
    seq_len: int, n_cmp: int, kernel_size: int, stride: int, device: torch.device, start: int = 0
) -> torch.Tensor:
    """``[T, C]`` bool: query ``t`` (at key position ``start + t``) sees compressed token
    ``c`` iff its span ends at or before that position."""
    t = torch.arange(start, start + seq_len, device=device)
    end = torch.arange(n_cmp, device=device) * stride + kernel_size - 1
    return end[None, :] <= t[:, None]


def mean_pool_compress(x: torch.Tensor, kernel_size: int = 32, stride: int = 16) -> torch.Tensor:
    """Parameter-free compression: the mean of each span of ``kernel_size`` tokens.

    Args:
        x: ``[B, T, H, D]`` keys or values.
        kernel_size: tokens per compressed token (l = 32 in NSA).
        stride: distance between span starts (d = 16 in NSA).

    Returns:
        ``[B, C, H, D]`` with ``C = (T - kernel_size) // stride + 1`` (0 when ``T < kernel_size``).

    Raises:
        TypeError: ``x`` is not a floating-point tensor.
        ValueError: ``x`` is not 4-D, or ``kernel_size`` / ``stride`` is not an int >= 1.

    Example:
        >>> import torch
        >>> mean_pool_compress(torch.ones(1, 64, 2, 8)).shape
        torch.Size([1, 3, 2, 8])
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(f"x must have shape [batch, seq, heads, head_dim], got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"x has dtype {x.dtype}; mean pooling needs a floating-point tensor")
    for name, val in (("kernel_size", kernel_size), ("stride", stride)):
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise ValueError(f"{name} must be an int >= 1, got {val!r}")
    b, t, h, d = x.shape
    c = num_compressed(t, kernel_size, stride)
    if c == 0:  # no complete span; still part of the graph (zero gradient for x)
        return zeros_output((b, 0, h, d), x)
    spans = x.unfold(1, kernel_size, stride)  # [B, C, H, D, kernel]
    return spans.mean(-1)


def compressed_attention_reference(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    v_cmp: torch.Tensor,
    kernel_size: int,
    stride: int,
    scale: float,
    start: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention of queries to compressed keys.

    Args:
        q: ``[B, T, HQ, D]`` queries at key positions ``start .. start + T - 1``.
        k_cmp: ``[B, C, H_kv, D]`` compressed keys.
        v_cmp: ``[B, C, H_kv, D]`` compressed values.
        kernel_size: span of a compressed token.
        stride: stride between spans.
        scale: softmax scale.
        start: key position of the first query (0: a prefill; decoding passes the
            position of the first new token).

    Returns:
        ``o [B, T, HQ, D]`` (0 for tokens that see no compressed token) in ``q.dtype`` and
        ``visible [B?, T]``-shaped bool ``[T]`` telling which tokens saw at least one.
    """
    _b, t, hq, _d = q.shape
    c, hkv = k_cmp.shape[1], k_cmp.shape[2]
    vis = compressed_visibility(t, c, kernel_size, stride, q.device, start)
    has = vis.any(-1)
    if c == 0 or q.numel() == 0:  # no compressed key yet, or nothing to attend
        return zeros_output(tuple(q.shape), q, k_cmp, v_cmp), has
    g = hq // hkv
    ad = acc_dtype(q.dtype)
    mask = vis.clone()
    mask[~has, 0] = True  # rows with nothing visible: any finite row, zeroed below
    o = F.scaled_dot_product_attention(
        q.to(ad).transpose(1, 2),
        k_cmp.to(ad).repeat_interleave(g, 2).transpose(1, 2),
        v_cmp.to(ad).repeat_interleave(g, 2).transpose(1, 2),
        attn_mask=mask,
        scale=scale,
    ).transpose(1, 2)
    o = torch.where(has.view(1, t, 1, 1), o, torch.zeros_like(o))
    return o.to(q.dtype), has


def block_overlap(
    n_cmp: int, n_blocks: int, kernel_size: int, stride: int, block_size: int, device: torch.device
) -> torch.Tensor:
    """``[C, NB]`` float: 1 where compressed span ``c`` overlaps selection block ``j``."""
    start = torch.arange(n_cmp, device=device) * stride
    end = start + kernel_size  # exclusive
    bstart = torch.arange(n_blocks, device=device) * block_size
    bend = bstart + block_size
    return ((start[:, None] < bend[None, :]) & (end[:, None] > bstart[None, :])).float()


@torch.no_grad()
def block_scores_reference(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    kernel_size: int,
    stride: int,
    block_size: int,
    scale: float,
    chunk: int = 1024,
    start: int = 0,
    kv_len: int | None = None,
) -> torch.Tensor:
    """Importance of each selection block for each token, shared by the query heads of a group.

    The compressed-attention probabilities ``p[t, h, c]`` are spread onto the selection
    blocks that span ``c`` overlaps and summed over the ``G`` query heads of each KV head.
    Query ``t`` sits at key position ``start + t`` and sees the spans that end at or
    before it (a prefill: ``start = 0``; decoding: the positions of the new tokens).

    Args:
        q: ``[B, T, HQ, D]`` queries.
        k_cmp: ``[B, C, H_kv, D]`` compressed keys of the ``kv_len`` keys.
        kernel_size: span of a compressed key.
        stride: distance between the spans.
        block_size: selection block length.
        scale: softmax scale.
        chunk: queries scored at a time.
        start: key position of the first query.
        kv_len: number of keys (default ``start + T``).

    Returns:
        ``[B, T, H_kv, NB]`` fp32 scores, ``NB = ceil(kv_len / block_size)``.
    """
    b, t, hq, _ = q.shape
    c, hkv = k_cmp.shape[1], k_cmp.shape[2]
    g = hq // hkv
    nb = -(-(start + t if kv_len is None else kv_len) // block_size)
    out = torch.zeros(b, t, hkv, nb, device=q.device, dtype=torch.float32)
    if c == 0:
        return out
    over = block_overlap(c, nb, kernel_size, stride, block_size, q.device)
    vis = compressed_visibility(t, c, kernel_size, stride, q.device, start)  # [T, C]
    kf = k_cmp.float().repeat_interleave(g, 2).transpose(1, 2)  # [B, HQ, C, D]
    for a in range(0, t, chunk):
        e = min(t, a + chunk)
        s = (q[:, a:e].float().transpose(1, 2) @ kf.transpose(-1, -2)) * scale  # [B, HQ, t, C]
        m = vis[a:e]
        s = s.masked_fill(~m, float("-inf"))
        p = torch.softmax(s, -1)
        p = torch.where(m.any(-1, keepdim=True), p, torch.zeros_like(p))
        sc = (p @ over).view(b, hkv, g, e - a, nb).sum(2)  # [B, H_kv, t, NB]
        out[:, a:e] = sc.permute(0, 2, 1, 3)
    return out


def num_query_groups(start: int, t: int, query_block: int) -> int:
    """Position-aligned groups of ``query_block`` met by positions ``start .. start + t - 1``
    (0 when ``t == 0``)."""
    if t <= 0:
        return 0
    return (start + t - 1) // query_block - start // query_block + 1


@torch.no_grad()
def group_block_scores_reference(
    q: torch.Tensor,
    k_cmp: torch.Tensor,
    start: int,
    kv_len: int,
    kernel_size: int,
    stride: int,
    block_size: int,
    query_block: int,
    scale: float,
) -> torch.Tensor:
    """InfLLM-v2's block scores of position-aligned query groups, in plain PyTorch.

    Query ``t`` sits at key position ``start + t`` and attends (softmax) to the
    compressed keys whose span ends at or before it. Its probabilities are summed over
    the ``G`` query heads of each KV head and over the queries of its group (positions
    ``[m * query_block, (m + 1) * query_block)``, cut by the ends of the queries), then
    max-pooled onto selection blocks: block ``j`` takes the largest sum among the spans
    that overlap it. Queries that see no compressed key contribute nothing.

    Args:
        q: ``[B, T, HQ, D]`` queries.
        k_cmp: ``[B, C, H_kv, D]`` compressed keys of the ``kv_len`` keys.
        start: key position of the first query.
        kv_len: number of keys S.
        kernel_size: span of a compressed key.
        stride: distance between span starts; divides ``block_size``.
        block_size: selection block length.
        query_block: queries per group (1: every query is its own group).
        scale: softmax scale.

    Returns:
        ``[B, NG, H_kv, NB]`` fp32, ``NG = num_query_groups(start, T, query_block)``,
        ``NB = ceil(kv_len / block_size)``.
    """
    b, t, hq, _ = q.shape
    c, hkv = k_cmp.shape[1], k_cmp.shape[2]
    g = hq // hkv
    dev = q.device
    ng = num_query_groups(start, t, query_block)
    nb = -(-kv_len // block_size)
    if b == 0 or t == 0:
        return torch.zeros(b, ng, hkv, nb, device=dev)
    r = block_size // stride
    pad = -(-kernel_size // stride) - 1  # spans starting before block j * r that reach it
    pos = torch.arange(start, start + t, device=dev)
    vis = (torch.arange(c, device=dev) * stride + kernel_size - 1)[None, :] <= pos[:, None]
    z = torch.einsum("bthd,bchd->bthc", q.float(), k_cmp.float().repeat_interleave(g, 2))
    z = (z * scale).masked_fill(~vis[None, :, None, :], float("-inf"))
    p = torch.softmax(z, -1).nan_to_num(nan=0.0).view(b, t, hkv, g, c).sum(3)
    gid = pos // query_block - start // query_block
    spans = torch.zeros(b, ng, hkv, pad + nb * r, device=dev)
    spans[..., pad : pad + c].index_add_(1, gid, p)
    return spans.unfold(-1, r + pad, r).amax(-1)
