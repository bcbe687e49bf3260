"""DSSA forward pass on ``[batch, seq, heads, head_dim]`` tensors (prefill and decode)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lc_attention._sdpa import masked_sdpa
from lc_attention.dssa.cache import CompressedKeyCache
from lc_attention.dssa.config import DSSAConfig
from lc_attention.dssa.selection import compress_keys, query_groups, select_group_blocks
from lc_attention.dssa.sparse import block_major_selected_attention
from lc_kernels import selected_attention


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            "query, key, value must be 4-D [batch, seq, heads, head_dim], got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if k.shape != v.shape:
        raise ValueError(f"key {tuple(k.shape)} and value {tuple(v.shape)} shapes differ")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"query {tuple(q.shape)} and key {tuple(k.shape)}: batch/head_dim differ")
    if q.shape[2] % k.shape[2]:
        raise ValueError(f"query heads {q.shape[2]} not a multiple of key heads {k.shape[2]}")
    if q.shape[1] > k.shape[1]:
        raise ValueError(f"more queries ({q.shape[1]}) than keys ({k.shape[1]})")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(
            f"query, key, value must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"query, key, value must be on one device, got {q.device}, {k.device}, {v.device}"
        )


def _check_mask(
    mask: torch.Tensor | None, q: torch.Tensor, k: torch.Tensor, per_head: bool
) -> None:
    """``attention_mask`` must be ``[B or 1, 1, T, S]`` (``per_head``: also ``HQ`` or
    ``H_kv`` heads), bool or floating, on the queries' device."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"attention_mask must be a torch.Tensor, got {type(mask).__name__}")
    b, t, hq, _ = q.shape
    s, hkv = k.shape[1], k.shape[2]
    heads = sorted({1, hkv, hq}) if per_head else [1]
    want = f"[{b} or 1, {'|'.join(map(str, heads))}, {t}, {s}]"
    if (
        mask.dim() != 4
        or mask.shape[0] not in (1, b)
        or mask.shape[2:] != (t, s)
        or mask.shape[1] not in heads
    ):
        extra = ""
        if mask.dim() == 4 and mask.shape[1] in (hq, hkv) and not per_head:
            extra = (
                " (dssa_attention takes one mask for all heads, a padding mask: the block "
                "selection is shared by each KV group and applies one mask per batch row)"
            )
        raise ValueError(
            f"attention_mask must have shape {want} = [batch, heads, queries, keys], got "
            f"{tuple(mask.shape)}{extra}"
        )
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise ValueError(
            "attention_mask must be bool (True = attend) or floating (additive, 0 = attend), "
            f"got {mask.dtype}"
        )
    if mask.device != q.device:
        raise ValueError(f"attention_mask is on {mask.device}, query on {q.device}")


def _check_kv_valid(
    kv_valid: torch.Tensor | None, attention_mask: torch.Tensor | None, k: torch.Tensor
) -> None:
    """``kv_valid`` must be ``[B, S]`` bool on the keys' device, and alone."""
    if kv_valid is None:
        return
    if attention_mask is not None:
        raise ValueError("give attention_mask or kv_valid, not both")
    if not isinstance(kv_valid, torch.Tensor):
        raise TypeError(f"kv_valid must be a torch.Tensor, got {type(kv_valid).__name__}")
    b, s = k.shape[:2]
    if tuple(kv_valid.shape) != (b, s) or kv_valid.dtype != torch.bool:
        raise ValueError(
            f"kv_valid must be a [batch={b}, keys={s}] bool tensor, got "
            f"{tuple(kv_valid.shape)} {kv_valid.dtype}"
        )
    if kv_valid.device != k.device:
        raise ValueError(f"kv_valid is on {kv_valid.device}, key on {k.device}")


def padding_mask(kv_valid: torch.Tensor, t: int) -> torch.Tensor:
    """``[B, 1, T, S]`` bool mask of ``T`` queries aligned to the end of ``S`` keys that see
    the earlier real keys: causal and ``kv_valid [B, S]``."""
    s = kv_valid.shape[1]
    pos = torch.arange(s - t, s, device=kv_valid.device)
    causal = torch.arange(s, device=kv_valid.device)[None, :] <= pos[:, None]
    return causal[None, None] & kv_valid[:, None, None, :]


def _bool_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    """``[B, 1|H, T, S]`` bool (True = attend) from a bool or additive float mask."""
    if mask is None or mask.dtype == torch.bool:
        return mask
    return mask == 0


def dense_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    scale: float | None = None,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal GQA attention, queries aligned to the end of the keys.

    Args:
        query: ``[B, T, HQ, D]``; query ``t`` sits at key position ``S - T + t``.
        key: ``[B, S, H_kv, D]``.
        value: ``[B, S, H_kv, D]``.
        scale: softmax scale, default ``1 / sqrt(D)``.
        attention_mask: optional ``[B or 1, 1 | HQ | H_kv, T, S]`` bool (True = attend)
            or additive float mask (0 = attend); one mask for all heads, one per query
            head, or one per KV head (shared by its query group). Replaces the causal
            mask when given.

    Returns:
        ``[B, T, HQ, D]``.

    Raises:
        ValueError: bad shapes, or an ``attention_mask`` of another shape, dtype or
            device.
    """
    _check(query, key, value)
    _check_mask(attention_mask, query, key, per_head=True)
    sc = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    t, s = query.shape[1], key.shape[1]
    allowed = _bool_mask(attention_mask)
    if allowed is None and t == s:
        o = F.scaled_dot_product_attention(
            query.transpose(1, 2),
            key.transpose(1, 2),
            value.transpose(1, 2),
            is_causal=True,
            scale=sc,
            enable_gqa=True,
        )
        return o.transpose(1, 2)
    if allowed is None:
        pos = torch.arange(s - t, s, device=query.device)
        allowed = (torch.arange(s, device=query.device)[None, :] <= pos[:, None])[None, None]
    return masked_sdpa(query, key, value, allowed, sc)


def dssa_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    config: DSSAConfig,
    scale: float | None = None,
    attention_mask: torch.Tensor | None = None,
    cache: CompressedKeyCache | None = None,
    layer_idx: int | None = None,
    kv_valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Dense-sparse switchable attention (InfLLM-v2).

    With ``S < config.dense_len`` keys, or in one of the first ``config.dense_layers``
    layers (``layer_idx``), this is dense causal attention. Otherwise every
    query attends only to the ``topk`` key blocks chosen by
    [select_blocks][lc_attention.dssa.selection.select_blocks] (initial, local and
    best-scoring blocks; all query heads of a GQA group share them). Queries are the
    last ``T`` positions of the ``S`` keys, so prefill (``T == S``), chunked prefill and
    decode (``T == 1`` over a KV cache) all go through here. The sparse stage has two
    paths, chosen by [sparse_path][lc_attention.dssa.attention.sparse_path]: on CUDA (or
    with ``backend="triton"``) without an ``attention_mask`` (a ``kv_valid`` padding
    mask is fine),
    [selected_attention][lc_kernels.selected_attention.selected_attention] (Triton, no
    host reads); everything else runs
    [block_major_selected_attention][lc_attention.dssa.sparse.block_major_selected_attention]
    in PyTorch (forced blocks per tile, every other selected block with the queries that
    chose it: exactly the selected work, ``O(T * topk * block_size)``). Off the CPU
    neither selection nor attention reads anything back from the device.

    Args:
        query: ``[B, T, HQ, D]`` queries.
        key: ``[B, S, H_kv, D]`` keys (the whole KV cache when decoding).
        value: ``[B, S, H_kv, D]`` values.
        config: DSSA hyper-parameters.
        scale: softmax scale, default ``1 / sqrt(D)``.
        attention_mask: optional ``[B or 1, 1, T, S]`` bool (True = attend) or additive
            float mask (0 = attend), one for all heads (padding); combined with the block
            selection in sparse mode. Per-head masks are refused at every length (the
            selection is shared by each KV group);
            [dense_attention][lc_attention.dssa.attention.dense_attention] takes them.
        cache: optional [CompressedKeyCache][lc_attention.dssa.cache.CompressedKeyCache]
            that extends the compressed keys incrementally across decode steps (a
            prefill with ``T == S`` resets it: a new sequence); without it they are
            recomputed from ``key``. One cache per layer: a cache that served another
            ``layer_idx`` raises.
        layer_idx: index of the decoder layer (``None``: unknown), compared with
            ``config.dense_layers``.
        kv_valid: optional ``[B, S]`` bool key padding mask (True = a real key), the
            common case of a causal mask plus padding; unlike ``attention_mask`` it is
            served by the Triton kernel. Give at most one of the two.

    Returns:
        ``[B, T, HQ, D]`` in ``query.dtype``. Differentiable in query, key and value (the
        block selection is discrete and carries no gradient), so a model can be
        fine-tuned with DSSA switched on, as InfLLM-v2 trains it.

    Raises:
        TypeError: ``config`` is not a ``DSSAConfig`` or ``cache`` not a
            ``CompressedKeyCache``.
        ValueError: bad shapes, an ``attention_mask`` of another shape (see above),
            dtype (bool or floating) or device, or a ``cache`` of another layer.

    Example:
        >>> import torch
        >>> cfg = DSSAConfig.small(dense_len=256, window=64, topk=2)
        >>> q = torch.randn(1, 300, 6, 16); k = torch.randn(1, 300, 2, 16)
        >>> dssa_attention(q, k, k, cfg).shape
        torch.Size([1, 300, 6, 16])
    """
    if not isinstance(config, DSSAConfig):
        raise TypeError(f"config must be a DSSAConfig, got {type(config).__name__}")
    _check(query, key, value)
    _check_mask(attention_mask, query, key, per_head=False)
    _check_kv_valid(kv_valid, attention_mask, key)
    if cache is not None:
        if not isinstance(cache, CompressedKeyCache):
            raise TypeError(f"cache must be a CompressedKeyCache, got {type(cache).__name__}")
        cache.bind_layer(layer_idx)
    t, s = query.shape[1], key.shape[1]
    sc = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if kv_valid is not None and (s < config.dense_len or not config.sparse_in_layer(layer_idx)):
        attention_mask = padding_mask(kv_valid, t)
    if s < config.dense_len or not config.sparse_in_layer(layer_idx):
        return dense_attention(query, key, value, sc, attention_mask)
    if cache is not None and t == s:
        cache.reset()  # a prefill without past keys starts a new sequence
    start = s - t
    with torch.no_grad():  # the selection is discrete: gradients flow through stage 2 only
        k_cmp = cache.update(key, config) if cache is not None else compress_keys(key, config)
        idx = select_group_blocks(query, k_cmp, start, s, config, sc)  # [B, NG, H_kv, K]
    return sparse_stage(query, key, value, idx, config, sc, _bool_mask(attention_mask), kv_valid)


def sparse_stage(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    idx: torch.Tensor,
    config: DSSAConfig,
    scale: float,
    allowed_pad: torch.Tensor | None = None,
    kv_valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """DSSA's second stage: attention of every query over the blocks ``idx`` selected,
    on the path [sparse_path][lc_attention.dssa.attention.sparse_path] chooses.

    Args:
        query: ``[B, T, HQ, D]`` queries, the last ``T`` of the ``S`` key positions.
        key: ``[B, S, H_kv, D]`` keys.
        value: ``[B, S, H_kv, D]`` values.
        idx: ``[B, NG, H_kv, K]`` block ids, one row per group of ``config.query_block``
            queries (``-1`` = unused slot), as
            [select_group_blocks][lc_attention.dssa.selection.select_group_blocks] returns.
        config: the layer's config (block size, forced blocks, backend).
        scale: softmax scale.
        allowed_pad: optional ``[B or 1, 1, T, S]`` bool mask (True = attend).
        kv_valid: optional ``[B, S]`` bool, True for real keys.

    Returns:
        ``[B, T, HQ, D]``.
    """
    t, s = query.shape[1], key.shape[1]
    start, qb = s - t, config.query_block
    if allowed_pad is not None and allowed_pad.shape[0] != query.shape[0]:
        allowed_pad = allowed_pad.expand(query.shape[0], -1, -1, -1)  # a view: batch 1
    use_triton = config.backend == "triton" or (config.backend == "auto" and query.is_cuda)
    if sparse_path(use_triton, allowed_pad is not None) == "triton":
        if qb > 1:  # one row per query
            idx = idx.index_select(1, query_groups(start, qb, t)[0].to(idx.device))
        return selected_attention(
            query.contiguous(),
            key.contiguous(),
            value.contiguous(),
            idx.contiguous(),
            config.block_size,
            scale,
            backend="triton",
            kv_valid=kv_valid,
            check=False,  # the selection is causal by construction
        )
    if kv_valid is not None:  # the PyTorch path takes it as a mask
        allowed_pad = padding_mask(kv_valid, t)
    return block_major_selected_attention(
        query,
        key,
        value,
        idx,
        start,
        config.block_size,
        scale,
        config.init_blocks,
        config.local_blocks,
        allowed_pad=allowed_pad,
        query_block=qb,
    )


#: the execution paths of DSSA's sparse stage, as named by ``sparse_path``
SPARSE_PATHS = ("triton", "block_major")


def sparse_path(use_triton: bool, masked: bool) -> str:
    """The one dispatcher of DSSA's sparse stage: which path computes the attention.

    - ``"triton"``: lc-kernels' ``selected_attention`` (CUDA, or ``backend="triton"``)
      when no ``attention_mask`` is given (``kv_valid`` is fine);
    - ``"block_major"``: everything else, in PyTorch
      ([block_major_selected_attention][lc_attention.dssa.sparse.block_major_selected_attention]:
      decode, prefill and chunked prefill, per-query and shared selections, padding
      masks, gradients).

    The PyTorch path is the fastest of the four that lc-attention 0.14 had, measured side
    by side (``benchmarks/dssa_sparse_paths.py``; ``docs/benchmarks/lc-attention-dssa.md``).

    Args:
        use_triton: the config's backend resolves to Triton for these tensors.
        masked: an ``attention_mask`` was given.

    Returns:
        One of ``SPARSE_PATHS``.

    Example:
        >>> sparse_path(False, False), sparse_path(True, False), sparse_path(True, True)
        ('block_major', 'triton', 'block_major')
    """
    return "triton" if use_triton and not masked else "block_major"
