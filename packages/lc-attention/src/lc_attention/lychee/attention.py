"""One decode step of hybrid-head attention for one layer.

Every query head ``h`` of a layer is either a *retrieval head* or a *sparse head*:

- a retrieval head attends to the whole KV cache, ``o_h = softmax(q_h K^T s) V``, and
  publishes ``I_h = topk_t(q_h . k_t)``, the ``k`` positions of its largest logits;
- a sparse head attends only to the positions ``I_h`` last published *at the same head
  index* by a retrieval head of an earlier layer:
  ``o_h = softmax(q_h K[I_h]^T s) V[I_h]``.

The published positions travel from layer to layer (the caller passes the ``indices``
returned by one layer into the next), which is the head-level version of TidalDecode's
layer-level token sharing. Keys and values use the layout ``[batch, seq, kv_heads,
head_dim]``; query head ``h`` reads KV head ``h // (HQ / HKV)``.

Example:
    >>> import torch
    >>> q = torch.randn(1, 4, 8)
    >>> k, v = torch.randn(1, 10, 2, 8), torch.randn(1, 10, 2, 8)
    >>> out, idx = hybrid_decode_attention(q, k, v, retrieval=[True] * 4, indices=None, topk=3)
    >>> tuple(out.shape), tuple(idx.shape)
    ((1, 4, 8), (1, 4, 3))
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lc_attention.lychee import _kernels
from lc_attention.lychee.config import BACKENDS


def _as_mask(x: Sequence[bool] | torch.Tensor, n: int, name: str, device) -> torch.Tensor:
    m = torch.as_tensor(x, dtype=torch.bool, device=device)
    if m.shape != (n,):
        raise ValueError(f"{name} must have one entry per query head ({n}), got {tuple(m.shape)}")
    return m


def _acc(x: torch.Tensor) -> torch.Tensor:
    """Softmax in fp32 for half-precision inputs (fp32 and fp64 stay as they are)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _full_group(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    bias: torch.Tensor | None,
    topk: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Dense attention of ``q [B, G, D]`` over one KV head ``k, v [B, T, D]``.

    Returns ``(out [B, G, D], indices [B, G, topk] or None)``.
    """
    logits = _acc(torch.matmul(q, k.transpose(-1, -2))) * scale  # [B, G, T]
    if bias is not None:
        logits = logits + bias[:, None, :]
    idx = torch.topk(logits, topk, dim=-1, sorted=False).indices if topk else None
    p = torch.softmax(logits, dim=-1).to(v.dtype)
    return torch.matmul(p, v), idx


def _sparse_gather(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor,
    kv_of_head: torch.Tensor,
    scale: float,
    bias: torch.Tensor | None,
) -> torch.Tensor:
    """Attention of ``q [B, S, D]`` over the gathered rows ``indices [B, S, K]`` only."""
    b = q.shape[0]
    kh = k_cache.transpose(1, 2)  # [B, HKV, T, D], a view
    vh = v_cache.transpose(1, 2)
    bi = torch.arange(b, device=q.device).view(b, 1, 1)
    hi = kv_of_head.view(1, -1, 1)
    ks, vs = kh[bi, hi, indices], vh[bi, hi, indices]  # [B, S, K, D]
    logits = _acc(torch.einsum("bsd,bskd->bsk", q, ks)) * scale
    if bias is not None:
        logits = logits + bias.gather(1, indices.flatten(1)).view_as(logits)
    p = torch.softmax(logits, dim=-1).to(vs.dtype)
    return torch.einsum("bsk,bskd->bsd", p, vs)


def hybrid_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    *,
    retrieval: Sequence[bool] | torch.Tensor,
    indices: torch.Tensor | None,
    topk: int,
    scale: float | None = None,
    publish: Sequence[bool] | torch.Tensor | None = None,
    valid: torch.Tensor | None = None,
    block_size: int = 64,
    backend: str = "gather",
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Hybrid-head attention of one decode token in one layer.

    Args:
        q: ``[B, HQ, D]`` query of the new token (RoPE applied).
        k_cache: ``[B, T, HKV, D]`` keys, the new token's included (any strides, e.g.
            ``key.transpose(1, 2)`` of Hugging Face's ``[B, HKV, T, D]``).
        v_cache: ``[B, T, HKV, D]`` values.
        retrieval: ``[HQ]`` booleans, True = retrieval head.
        indices: ``[B, HQ, topk]`` int64 positions published by earlier layers (rows of
            retrieval heads are ignored); ``None`` only when every head is a retrieval head.
        topk: positions per head, ``1 <= topk <= T``.
        scale: softmax scale, default ``D ** -0.5``.
        publish: ``[HQ]`` retrieval heads whose top-k to compute (default: all retrieval
            heads; heads whose positions no later layer reads may be left out).
        valid: optional ``[B, T]`` bool, False for padding positions (gather backend).
        block_size: block length of the kernels' block-wise top-k.
        backend: ``"gather"`` (plain PyTorch), ``"kernels"`` (``lc_kernels.decode``) or
            ``"auto"`` (kernels on CUDA, gather elsewhere).

    Returns:
        ``(out [B, HQ, D], indices [B, HQ, topk])``: the attention output and the positions
        to hand to the next layer (the input ``indices`` with the published rows
        replaced; ``None`` when nothing was published and none came in).

    Raises:
        ValueError: bad shapes, ``topk`` outside ``[1, T]``, sparse heads without
            ``indices``, a publish flag on a sparse head, or ``valid`` with the kernels
            backend.
    """
    if q.dim() != 3 or k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(
            "expected q [B, HQ, D] and k_cache, v_cache [B, T, HKV, D] of equal shape, got "
            f"{tuple(q.shape)}, {tuple(k_cache.shape)}, {tuple(v_cache.shape)}"
        )
    b, hq, d = q.shape
    _, t, hkv, dk = k_cache.shape
    if k_cache.shape[0] != b or dk != d or hq % hkv:
        raise ValueError(
            f"q {tuple(q.shape)} does not fit k_cache {tuple(k_cache.shape)} (batch, head_dim, "
            "and query heads a multiple of KV heads must agree)"
        )
    if not isinstance(topk, int) or not 1 <= topk <= t:
        raise ValueError(f"topk must be an integer in [1, T={t}] (context length), got {topk!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        backend = "kernels" if q.is_cuda and _kernels.kernels_available() else "gather"
    dev = q.device
    ret = _as_mask(retrieval, hq, "retrieval", dev)
    pub = ret if publish is None else _as_mask(publish, hq, "publish", dev)
    if bool((pub & ~ret).any()):
        raise ValueError("publish may only flag retrieval heads")
    sparse_heads = (~ret).nonzero().flatten()
    if sparse_heads.numel():
        if indices is None:
            raise ValueError("sparse heads need indices published by an earlier layer")
        if indices.shape != (b, hq, topk):
            raise ValueError(
                f"indices must be [B, HQ, topk]={[b, hq, topk]}, got {list(indices.shape)}"
            )
    if valid is not None:
        if valid.shape != (b, t):
            raise ValueError(f"valid must be [B, T]={[b, t]}, got {list(valid.shape)}")
        if backend == "kernels":
            raise ValueError("valid (padding) masks are supported by the gather backend only")
    scale = d**-0.5 if scale is None else float(scale)
    bias = None
    if valid is not None and not bool(valid.all()):
        bias = torch.zeros(b, t, device=dev).masked_fill(~valid, float("-inf"))

    out = q.new_empty(b, hq, d)
    new_idx = None if indices is None else indices.clone()
    if bool(pub.any()) and new_idx is None:
        new_idx = torch.zeros(b, hq, topk, dtype=torch.long, device=dev)
    group = hq // hkv
    kv_of_head = torch.arange(hq, device=dev) // group
    # retrieval heads: one call per KV head, on that head's [B, T, 1, D] slice of the cache
    for j in range(hkv):
        heads = (ret & (kv_of_head == j)).nonzero().flatten()
        if not heads.numel():
            continue
        need = bool(pub[heads].any())
        kj, vj = k_cache[:, :, j], v_cache[:, :, j]  # [B, T, D]
        idx: torch.Tensor | None
        if backend == "kernels":
            o, idx = _kernels.retrieval(
                q[:, heads],
                kj.unsqueeze(2),
                vj.unsqueeze(2),
                topk,
                scale=scale,
                block_size=block_size,
            )
        else:
            o, idx = _full_group(q[:, heads], kj, vj, scale, bias, topk if need else 0)
        out[:, heads] = o.to(out.dtype)
        if need and idx is not None and new_idx is not None:
            keep = pub[heads]
            new_idx[:, heads[keep]] = idx[:, keep].to(torch.long)
    if sparse_heads.numel():
        assert indices is not None
        sel = indices[:, sparse_heads]
        if backend == "kernels":
            # one launch over all heads (the kernel maps query head -> KV head itself);
            # retrieval rows cost k positions each and are discarded
            o = _kernels.sparse(q, k_cache, v_cache, indices, scale=scale)[:, sparse_heads]
        else:
            o = _sparse_gather(
                q[:, sparse_heads], k_cache, v_cache, sel, kv_of_head[sparse_heads], scale, bias
            )
        out[:, sparse_heads] = o.to(out.dtype)
    return out, new_idx
