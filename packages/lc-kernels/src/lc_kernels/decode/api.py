"""Public decode ops of hybrid-head sparse decoding: checks, then Triton or the reference.

Retrieval heads run :func:`retrieval_decode_attention` (full attention that also returns
the top-k key positions by attention score); sparse heads run
:func:`sparse_decode_attention` over those positions only. :func:`block_topk` is the
block-wise exact top-k both rely on.
"""

from __future__ import annotations

import torch

from lc_kernels._common import FLOAT_DTYPES, default_scale, resolve_backend
from lc_kernels.backend import Backend
from lc_kernels.decode.reference import (
    block_topk_torch,
    full_decode_attention_reference,
    retrieval_decode_attention_reference,
    sparse_decode_attention_reference,
)

INT_DTYPES = (torch.int16, torch.int32, torch.int64)


def _pow2_at_least_16(n: int) -> bool:
    return n >= 16 and not n & (n - 1)


def _check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def check_valid_len(
    valid_len: torch.Tensor | None, batch: int, seq: int, device: torch.device
) -> torch.Tensor | None:
    """Check ``valid_len`` (``[batch]`` integer lengths in ``[0, seq]``); return it as int64."""
    if valid_len is None:
        return None
    if not isinstance(valid_len, torch.Tensor):
        raise TypeError(f"valid_len must be a torch.Tensor or None, got {type(valid_len).__name__}")
    if valid_len.dtype not in INT_DTYPES:
        raise TypeError(f"valid_len must be an integer tensor, got {valid_len.dtype}")
    if tuple(valid_len.shape) != (batch,):
        raise ValueError(f"valid_len must have shape [batch={batch}], got {tuple(valid_len.shape)}")
    if valid_len.device != device:
        raise ValueError(f"valid_len is on {valid_len.device}, the inputs on {device}")
    if valid_len.numel() == 0:  # an empty batch
        return valid_len.to(torch.int64)
    lo, hi = int(valid_len.min()), int(valid_len.max())
    if lo < 0 or hi > seq:
        raise ValueError(f"valid_len values must lie in [0, seq={seq}], got min {lo}, max {hi}")
    return valid_len.to(torch.int64)


def _check_k(name: str, k: object, seq: int, valid_len: torch.Tensor | None) -> int:
    k = _check_positive_int(name, k)
    if k > seq:
        raise ValueError(f"{name}={k} is larger than the context length seq={seq}")
    if valid_len is not None and valid_len.numel() > 0:
        shortest = int(valid_len.min())
        if k > shortest:
            b = int(valid_len.argmin())
            raise ValueError(
                f"{name}={k} is larger than the valid context of batch row {b} "
                f"(valid_len[{b}]={shortest})"
            )
    return k


def check_decode_inputs(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
) -> tuple[int, int, int, int, int]:
    """Check ``q [B, HQ, D]`` and caches ``[B, S, HKV, D]``; return ``(B, HQ, S, HKV, D)``."""
    for name, x, rank, layout in (
        ("q", q, 3, "[batch, q_heads, head_dim]"),
        ("k_cache", k_cache, 4, "[batch, seq, kv_heads, head_dim]"),
        ("v_cache", v_cache, 4, "[batch, seq, kv_heads, head_dim]"),
    ):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != rank:
            raise ValueError(f"{name} must have shape {layout}, got {tuple(x.shape)}")
        if x.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{name} has dtype {x.dtype}; allowed: {FLOAT_DTYPES}")
    if not (q.dtype == k_cache.dtype == v_cache.dtype):
        raise TypeError(
            f"q, k_cache, v_cache must share a dtype, got {q.dtype}, {k_cache.dtype}, "
            f"{v_cache.dtype}"
        )
    if not (q.device == k_cache.device == v_cache.device):
        raise ValueError(
            f"q, k_cache, v_cache must share a device, got {q.device}, {k_cache.device}, "
            f"{v_cache.device}"
        )
    if k_cache.shape != v_cache.shape:
        raise ValueError(
            f"k_cache and v_cache must have the same shape, got {tuple(k_cache.shape)} and "
            f"{tuple(v_cache.shape)}"
        )
    b, hq, d = q.shape
    kb, s, hkv, kd = k_cache.shape
    if kb != b or kd != d:
        raise ValueError(
            f"q {tuple(q.shape)} and k_cache {tuple(k_cache.shape)} must agree on batch and "
            "head_dim (cache layout [batch, seq, kv_heads, head_dim]; pass "
            "cache.transpose(1, 2) for a [batch, kv_heads, seq, head_dim] cache)"
        )
    if hkv == 0 or hq % hkv != 0:
        raise ValueError(
            f"mismatched heads: {hq} query heads is not a multiple of {hkv} key/value heads"
        )
    if s == 0:
        raise ValueError("the cache is empty (seq=0)")
    return b, hq, s, hkv, d


def check_indices(indices: torch.Tensor, b: int, hq: int, hkv: int, s: int, device) -> None:
    """Check decode ``indices`` (``[B, HQ, K]`` or ``[B, HKV, K]``, ids in ``[-1, S)``)."""
    if not isinstance(indices, torch.Tensor):
        raise TypeError(f"indices must be a torch.Tensor, got {type(indices).__name__}")
    if indices.dtype not in INT_DTYPES:
        raise TypeError(f"indices must be an integer tensor, got {indices.dtype}")
    if indices.dim() != 3 or indices.shape[0] != b or indices.shape[1] not in (hq, hkv):
        raise ValueError(
            f"indices must have shape [batch={b}, q_heads={hq}, K] or "
            f"[batch={b}, kv_heads={hkv}, K], got {tuple(indices.shape)}"
        )
    if indices.shape[2] == 0:
        raise ValueError("indices needs at least one slot (K >= 1)")
    if indices.device != device:
        raise ValueError(f"indices is on {indices.device}, q on {device}")
    bad = (indices < -1) | (indices >= s)
    if bool(bad.any()):
        bi, hi, ki = (int(x) for x in torch.nonzero(bad)[0])
        raise ValueError(
            f"indices[{bi}, {hi}, {ki}] = {int(indices[bi, hi, ki])} is out of range: "
            f"allowed are -1 (unused slot) and positions 0..{s - 1}"
        )


def _no_rows(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of a ``[B, H, S]`` score tensor with no rows: empty ``[B, H, k]`` results."""
    b, h, _ = scores.shape
    idx = torch.empty(b, h, k, dtype=torch.int64, device=scores.device)
    return scores.new_empty(b, h, k), idx


def block_topk(
    scores: torch.Tensor,
    k: int,
    *,
    block_size: int = 128,
    valid_len: torch.Tensor | None = None,
    backend: Backend | str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-``k`` of each row, computed block-wise (partial top-k per block, then merge).

    Every block of ``block_size`` positions keeps its own best ``min(k, block_size)``
    candidates; the candidates are then merged (on Triton in rounds of the same kind until
    one block is left). The result is exact: it equals a full sort.

    Tie rule (deterministic on every backend): among equal scores the lower position
    wins and comes first. Positions ``>= valid_len[b]`` never take part. ``-inf`` scores
    at valid positions are ordinary (lowest) scores; NaN is not supported.

    Args:
        scores: ``[batch, heads, seq]`` float scores (any strides).
        k: positions to keep per row, ``1 <= k <= min(valid_len)`` (``<= seq``).
        block_size: positions per first-stage block; the Triton kernel needs a power of
            two >= 16 (``auto`` uses the PyTorch path for other sizes). Blocks larger than
            ``k`` give the first stage something to discard.
        valid_len: optional ``[batch]`` integer valid lengths of each row's context.
        backend: ``"auto"`` (Triton on CUDA, PyTorch elsewhere), ``"triton"``, ``"torch"``.

    Returns:
        ``(values, indices)``, each ``[batch, heads, k]``: values in ``scores.dtype``
        sorted descending, indices int64.

    Example:
        >>> import torch
        >>> from lc_kernels.decode import block_topk
        >>> s = torch.tensor([[[0.1, 0.9, 0.5, 0.9, 0.2]]])
        >>> block_topk(s, 3, block_size=2)[1].tolist()
        [[[1, 3, 2]]]
    """
    if not isinstance(scores, torch.Tensor):
        raise TypeError(f"scores must be a torch.Tensor, got {type(scores).__name__}")
    if scores.dim() != 3:
        raise ValueError(f"scores must have shape [batch, heads, seq], got {tuple(scores.shape)}")
    if scores.dtype not in FLOAT_DTYPES:
        raise TypeError(f"scores has dtype {scores.dtype}; allowed: {FLOAT_DTYPES}")
    b, _, s = scores.shape
    block_size = _check_positive_int("block_size", block_size)
    vl = check_valid_len(valid_len, b, s, scores.device)
    k = _check_k("k", k, s, vl)
    kernel_ok = _pow2_at_least_16(block_size)
    if backend == "triton" and not kernel_ok:
        raise ValueError(
            f"the Triton kernel needs block_size a power of two >= 16, got {block_size}"
        )
    chosen = resolve_backend(backend, scores.device, scores.dtype)
    if scores.numel() == 0:  # no rows (batch or heads 0): nothing to rank
        return _no_rows(scores, k)
    if chosen == "torch" or not kernel_ok:
        return block_topk_torch(scores, k, block_size, vl)
    from lc_kernels.decode.triton import block_topk_triton

    return block_topk_triton(scores, k, block_size, vl)


def retrieval_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    topk: int,
    *,
    block_size: int = 128,
    scale: float | None = None,
    valid_len: torch.Tensor | None = None,
    backend: Backend | str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """One decode step of full attention that also returns the top-``topk`` key positions.

    This is the op of a retrieval head: ``out = softmax(q K^T * scale) V`` over the valid
    cache, and ``indices`` = the ``topk`` positions with the largest attention scores
    ``q . k * scale`` (equivalently the largest softmax weights), per query head, sorted
    by score with the lower position first among ties (see :func:`block_topk`).

    Args:
        q: ``[B, HQ, D]`` query of the new token (float16, bfloat16, float32; float64 on
            the torch backend).
        k_cache: ``[B, S, HKV, D]`` keys, any strides (e.g. ``hf_cache.transpose(1, 2)``
            of a Hugging Face ``[B, HKV, S, D]`` cache; the Triton path reads it in place).
            ``HQ`` must be a multiple of ``HKV`` (grouped-query attention).
        v_cache: ``[B, S, HKV, D]`` values, same shape as ``k_cache``.
        topk: positions to return per query head, ``1 <= topk <= min(valid_len)``.
        block_size: first-stage block of the top-k (see :func:`block_topk`).
        scale: softmax scale, default ``1 / sqrt(D)``.
        valid_len: optional ``[B]`` valid lengths; positions ``>= valid_len[b]`` are masked.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        ``(out, indices)``: ``out [B, HQ, D]`` in ``q.dtype`` and ``indices [B, HQ, topk]``
        int64. On the Triton path the scores are computed in fp32 from the inputs' dtype,
        so with half inputs near-ties may order differently than an fp64 recomputation.

    Example:
        >>> import torch
        >>> from lc_kernels.decode import retrieval_decode_attention
        >>> q = torch.randn(2, 8, 64); k = torch.randn(2, 100, 2, 64); v = torch.randn_like(k)
        >>> out, idx = retrieval_decode_attention(q, k, v, topk=16)
        >>> out.shape, idx.shape
        (torch.Size([2, 8, 64]), torch.Size([2, 8, 16]))
    """
    b, _hq, s, _hkv, d = check_decode_inputs(q, k_cache, v_cache)
    sc = default_scale(scale, d)
    vl = check_valid_len(valid_len, b, s, q.device)
    topk = _check_k("topk", topk, s, vl)
    block_size = _check_positive_int("block_size", block_size)
    kernel_ok = _pow2_at_least_16(block_size)
    if backend == "triton" and not kernel_ok:
        raise ValueError(
            f"the Triton kernel needs block_size a power of two >= 16, got {block_size}"
        )
    chosen = resolve_backend(backend, q.device, q.dtype)
    if chosen == "torch" or not kernel_ok:
        out, idx = retrieval_decode_attention_reference(q, k_cache, v_cache, topk, sc, vl)
        return out, idx
    from lc_kernels.decode.triton import block_topk_triton, decode_attention_triton

    out, logits = decode_attention_triton(q, k_cache, v_cache, None, sc, vl, want_logits=True)
    assert logits is not None
    if logits.numel() == 0:  # an empty batch (or no query heads)
        return out, _no_rows(logits, topk)[1]
    _, idx = block_topk_triton(logits, topk, block_size, vl)
    return out, idx


def sparse_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor,
    *,
    scale: float | None = None,
    check: bool = True,
    backend: Backend | str = "auto",
) -> torch.Tensor:
    """One decode step of attention over the key/value positions in ``indices`` only.

    This is the op of a sparse head: it reuses positions chosen by a retrieval head.
    ``indices`` may hold one list per query head (``[B, HQ, K]``) or one list per KV head
    (``[B, HKV, K]``, shared by the ``HQ / HKV`` query heads of its group; when
    ``HQ == HKV`` both readings agree). ``-1`` marks an unused slot; a repeated position
    counts once per occurrence (plain gather semantics); a head with only ``-1`` slots
    gets a zero output. The Triton path reads the selected rows of the cache in place
    (no gathered copy).

    Args:
        q: ``[B, HQ, D]`` query of the new token.
        k_cache: ``[B, S, HKV, D]`` keys, any strides.
        v_cache: ``[B, S, HKV, D]`` values.
        indices: ``[B, HQ, K]`` or ``[B, HKV, K]`` integer positions in ``[-1, S)``.
        scale: softmax scale, default ``1 / sqrt(D)``.
        check: validate the range of ``indices`` (one device sync; turn off in a hot loop
            once the producer is trusted).
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        ``[B, HQ, D]`` in ``q.dtype``.

    Example:
        >>> import torch
        >>> from lc_kernels.decode import sparse_decode_attention
        >>> q = torch.randn(1, 4, 32); k = torch.randn(1, 50, 2, 32); v = torch.randn_like(k)
        >>> idx = torch.tensor([[[0, 7, 49, -1], [3, 4, 5, 6]]])  # shared per KV head
        >>> sparse_decode_attention(q, k, v, idx).shape
        torch.Size([1, 4, 32])
    """
    b, hq, s, hkv, d = check_decode_inputs(q, k_cache, v_cache)
    sc = default_scale(scale, d)
    if check:
        check_indices(indices, b, hq, hkv, s, q.device)
    chosen = resolve_backend(backend, q.device, q.dtype)
    if chosen == "torch":
        return sparse_decode_attention_reference(q, k_cache, v_cache, indices, sc)
    from lc_kernels.decode.triton import decode_attention_triton

    out, _ = decode_attention_triton(q, k_cache, v_cache, indices, sc, None, want_logits=False)
    return out


def full_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    *,
    scale: float | None = None,
    valid_len: torch.Tensor | None = None,
    backend: Backend | str = "auto",
) -> torch.Tensor:
    """Dense decode attention (no top-k): the baseline of the two ops above.

    Shapes as in :func:`retrieval_decode_attention`; returns ``[B, HQ, D]``.

    Example:
        >>> import torch
        >>> from lc_kernels.decode import full_decode_attention
        >>> q = torch.randn(1, 4, 32); k = torch.randn(1, 50, 2, 32)
        >>> full_decode_attention(q, k, k).shape
        torch.Size([1, 4, 32])
    """
    b, _hq, s, _hkv, d = check_decode_inputs(q, k_cache, v_cache)
    sc = default_scale(scale, d)
    vl = check_valid_len(valid_len, b, s, q.device)
    chosen = resolve_backend(backend, q.device, q.dtype)
    if chosen == "torch":
        return full_decode_attention_reference(q, k_cache, v_cache, sc, vl)
    from lc_kernels.decode.triton import decode_attention_triton

    out, _ = decode_attention_triton(q, k_cache, v_cache, None, sc, vl, want_logits=False)
    return out
