"""Plain PyTorch versions of the decode ops: the test oracle and the CPU path.

Layout: the key/value cache is ``[batch, seq, kv_heads, head_dim]`` (any strides) and a
decode query is ``[batch, q_heads, head_dim]``. Scores and softmax accumulate in fp32
(fp64 inputs stay fp64).

Tie rule of every top-k here: positions are ordered by score, descending, and among
equal scores the lower position comes first. Positions at or past ``valid_len`` never
take part.
"""

from __future__ import annotations

import torch

from lc_kernels._common import acc_dtype


def valid_mask(valid_len: torch.Tensor | None, batch: int, seq: int, device: torch.device):
    """``[batch, 1, seq]`` bool mask of the positions below ``valid_len`` (all when ``None``)."""
    pos = torch.arange(seq, device=device)
    if valid_len is None:
        return torch.ones(batch, 1, seq, dtype=torch.bool, device=device)
    return pos.view(1, 1, seq) < valid_len.to(device).view(batch, 1, 1)


def topk_reference(
    scores: torch.Tensor, k: int, valid_len: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-``k`` of each row by one stable descending sort (the test oracle).

    Args:
        scores: ``[batch, heads, seq]`` float scores.
        k: how many positions to keep per row.
        valid_len: optional ``[batch]`` lengths; positions ``>= valid_len[b]`` are excluded.

    Returns:
        ``(values, indices)``, each ``[batch, heads, k]``, sorted by value descending with
        the lower index first among equal values; ``indices`` are int64.
    """
    b, _, s = scores.shape
    x = scores.masked_fill(~valid_mask(valid_len, b, s, scores.device), float("-inf"))
    # stable sort keeps equal values in index order; masked positions (-inf) sit after
    # every valid position of equal value because they have larger indices
    _, order = torch.sort(x, dim=-1, descending=True, stable=True)
    idx = order[..., :k]
    return scores.gather(-1, idx), idx


def block_topk_torch(
    scores: torch.Tensor, k: int, block_size: int, valid_len: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Block-wise top-``k`` in PyTorch: per-block partial top-k, then one merge.

    Each block of ``block_size`` positions keeps its best ``min(k, block_size)``
    candidates (stable order); the candidates, laid out block after block, are merged by
    a stable sort. Any element of the global top-``k`` has fewer than ``k`` elements
    ranked above it in its own block, so it survives the first stage: the result equals
    :func:`topk_reference` exactly, ties included.
    """
    b, h, s = scores.shape
    nb = -(-s // block_size)
    keep = min(k, block_size)
    x = scores.masked_fill(~valid_mask(valid_len, b, s, scores.device), float("-inf"))
    x = torch.nn.functional.pad(x, (0, nb * block_size - s), value=float("-inf"))
    _, order = torch.sort(x.view(b, h, nb, block_size), dim=-1, descending=True, stable=True)
    cand = order[..., :keep] + torch.arange(nb, device=x.device).view(1, 1, nb, 1) * block_size
    cand = cand.reshape(b, h, nb * keep)
    _, pick = torch.sort(x.gather(-1, cand), dim=-1, descending=True, stable=True)
    idx = cand.gather(-1, pick[..., :k])
    return scores.gather(-1, idx), idx


def _grouped_kv(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[B, S, HKV, D] -> [B, HKV, S, D]`` in ``dtype`` (a view when no cast is needed)."""
    return x.permute(0, 2, 1, 3).to(dtype)


def decode_logits_reference(
    q: torch.Tensor, k_cache: torch.Tensor, scale: float, valid_len: torch.Tensor | None = None
) -> torch.Tensor:
    """``[B, HQ, S]`` scaled logits ``q . k * scale`` in the accumulation dtype; -inf past
    ``valid_len``. Query head ``h`` reads KV head ``h // (HQ / HKV)``."""
    b, hq, d = q.shape
    s, hkv = k_cache.shape[1], k_cache.shape[2]
    dt = acc_dtype(q.dtype)
    qg = q.to(dt).view(b, hkv, hq // hkv, d)
    logits = (qg @ _grouped_kv(k_cache, dt).transpose(-1, -2)).reshape(b, hq, s) * scale
    return logits.masked_fill(~valid_mask(valid_len, b, s, q.device), float("-inf"))


def full_decode_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    scale: float,
    valid_len: torch.Tensor | None = None,
) -> torch.Tensor:
    """Dense softmax attention of one decode query per head over the (valid) cache.

    Returns ``[B, HQ, D]`` in ``q.dtype`` (a row with no valid position gives zeros).
    """
    b, hq, d = q.shape
    s, hkv = k_cache.shape[1], k_cache.shape[2]
    logits = decode_logits_reference(q, k_cache, scale, valid_len)
    p = torch.softmax(logits, dim=-1).nan_to_num(0.0).view(b, hkv, hq // hkv, s)
    return (p @ _grouped_kv(v_cache, p.dtype)).reshape(b, hq, d).to(q.dtype)


def retrieval_decode_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    topk: int,
    scale: float,
    valid_len: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Full decode attention plus the top-``topk`` positions by logit per query head.

    Returns ``(out [B, HQ, D], indices [B, HQ, topk] int64)``; the top-k follows the tie
    rule of :func:`topk_reference` on the fp32 (fp64 for fp64 inputs) logits.
    """
    logits = decode_logits_reference(q, k_cache, scale, valid_len)
    _, idx = topk_reference(logits, topk, valid_len)
    return full_decode_attention_reference(q, k_cache, v_cache, scale, valid_len), idx


def sparse_decode_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Decode attention over the gathered positions ``indices`` only (materialized gather).

    ``indices`` is ``[B, HQ, K]`` (one list per query head) or ``[B, HKV, K]`` (one list per
    KV head, shared by its query group); ``-1`` slots are ignored and a repeated position
    counts once per occurrence. A head whose slots are all ``-1`` gets zeros.
    """
    b, hq, _ = q.shape
    hkv = k_cache.shape[2]
    dt = acc_dtype(q.dtype)
    if indices.shape[1] == hkv and hkv != hq:
        indices = indices.repeat_interleave(hq // hkv, dim=1)
    used = indices >= 0
    safe = indices.clamp_min(0).long()
    bi = torch.arange(b, device=q.device).view(b, 1, 1)
    hi = (torch.arange(hq, device=q.device) // (hq // hkv)).view(1, hq, 1)
    ks, vs = k_cache[bi, safe, hi].to(dt), v_cache[bi, safe, hi].to(dt)  # [B, HQ, K, D]
    logits = torch.einsum("bhd,bhkd->bhk", q.to(dt), ks) * scale
    logits = logits.masked_fill(~used, float("-inf"))
    p = torch.softmax(logits, dim=-1).nan_to_num(0.0)
    return torch.einsum("bhk,bhkd->bhd", p, vs).to(q.dtype)
