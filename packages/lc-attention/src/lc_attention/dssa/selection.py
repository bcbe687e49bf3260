"""Stage 1 of DSSA: compressed keys, group-summed scores, max-pooling, top-k blocks."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lc_attention.dssa.config import DSSAConfig
from lc_kernels import mean_pool_compress, num_compressed
from lc_kernels.compressed_attention import topk_blocks_from_scores


def compress_keys(key: torch.Tensor, config: DSSAConfig) -> torch.Tensor:
    """Mean-pooled keys: ``[B, S, H_kv, D] -> [B, C, H_kv, D]``, ``C = (S - l) // d + 1``."""
    return mean_pool_compress(key, config.kernel_size, config.stride)


@torch.no_grad()
def block_scores(
    query: torch.Tensor,
    k_cmp: torch.Tensor,
    positions: torch.Tensor,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
    chunk: int = 512,
) -> torch.Tensor:
    """Importance of every key block for every query, shared by a GQA group.

    For query ``t`` at position ``p_t`` the softmax attention to the compressed keys
    whose span ends at or before ``p_t`` is summed over the ``G`` query heads of each
    KV head, then max-pooled onto the selection blocks: block ``j`` takes the largest
    score among the compressed spans that overlap it (with l = 32, d = 16, block 64:
    a window of 5 compressed tokens with step 4, as in InfLLM-v2).

    Args:
        query: ``[B, T, HQ, D]`` queries.
        k_cmp: ``[B, C, H_kv, D]`` compressed keys.
        positions: ``[T]`` int64 key positions of the queries.
        kv_len: number of keys S.
        config: DSSA config (kernel, stride, block size).
        scale: softmax scale.
        chunk: queries scored at a time (bounds memory to ``chunk * HQ * C`` floats).

    Returns:
        ``[B, T, H_kv, NB]`` float32 scores, ``NB = ceil(S / block_size)``.
    """
    b, t, hq, _ = query.shape
    c, hkv = k_cmp.shape[1], k_cmp.shape[2]
    g = hq // hkv
    bs, st, ks = config.block_size, config.stride, config.kernel_size
    nb = -(-kv_len // bs)
    out = torch.zeros(b, t, hkv, nb, device=query.device, dtype=torch.float32)
    if c == 0:
        return out
    r = bs // st
    pad_left = -(-ks // st) - 1  # compressed tokens before block j*r that still overlap it
    pad_right = nb * r - c  # >= 0: a span ending before S starts before block NB's end
    ends = torch.arange(c, device=query.device) * st + ks - 1
    kf = k_cmp.float().repeat_interleave(g, 2).transpose(1, 2)  # [B, HQ, C, D]
    for a in range(0, t, chunk):
        e = min(t, a + chunk)
        vis = ends[None, :] <= positions[a:e, None]  # [t, C]
        s = (query[:, a:e].float().transpose(1, 2) @ kf.transpose(-1, -2)) * scale
        s = s.masked_fill(~vis, float("-inf"))
        p = torch.softmax(s, -1)
        p = torch.where(vis.any(-1, keepdim=True), p, torch.zeros_like(p))
        p = p.view(b, hkv, g, e - a, c).sum(2)  # [B, H_kv, t, C]
        p = F.pad(p, (pad_left, pad_right))  # length pad_left + NB * r
        win = p.unfold(-1, r + pad_left, r)  # [B, H_kv, t, NB, r + pad_left]
        out[:, a:e] = win.amax(-1).permute(0, 2, 1, 3)
    return out


@torch.no_grad()
def select_blocks(
    query: torch.Tensor,
    k_cmp: torch.Tensor,
    positions: torch.Tensor,
    kv_len: int,
    config: DSSAConfig,
    scale: float,
) -> torch.Tensor:
    """Block ids each query attends to in sparse mode.

    The first ``init_blocks`` blocks and the ``local_blocks`` most recent ones (the
    query's own block and those just before it) are always taken, future blocks never;
    the remaining slots of the ``topk`` go to the best max-pooled scores.

    Args:
        query: ``[B, T, HQ, D]`` queries.
        k_cmp: ``[B, C, H_kv, D]`` compressed keys of the ``kv_len`` keys.
        positions: ``[T]`` key positions of the queries.
        kv_len: number of keys S.
        config: DSSA config.
        scale: softmax scale.

    Returns:
        ``[B, T, H_kv, topk]`` int32 block ids, ``-1`` in slots that cannot be filled.

    Example:
        >>> import torch
        >>> cfg = DSSAConfig.small()
        >>> q = torch.randn(1, 4, 6, 16); k = torch.randn(1, 2048, 2, 16)
        >>> pos = torch.arange(2044, 2048)
        >>> idx = select_blocks(q, compress_keys(k, cfg), pos, 2048, cfg, 0.25)
        >>> idx.shape, int(idx.max())
        (torch.Size([1, 4, 2, 16]), 31)
    """
    scores = block_scores(query, k_cmp, positions, kv_len, config, scale)
    return topk_blocks_from_scores(
        scores, config.block_size, config.topk, config.init_blocks, config.local_blocks, positions
    )


def num_compressed_keys(kv_len: int, config: DSSAConfig) -> int:
    """Number of compressed keys of ``kv_len`` keys."""
    return num_compressed(kv_len, config.kernel_size, config.stride)
