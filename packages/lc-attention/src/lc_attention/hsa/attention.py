"""Token-level attention into retrieved chunks (hierarchical sparse attention).

Query heads are grouped: ``H = G * R`` query heads, ``G`` retrieval/key-value heads, and
the ``R`` query heads of group ``g`` share the chunks that group ``g`` selected and its
keys and values (grouped-query layout: query head ``h`` belongs to group ``h // R``).
For query ``t``, head ``h`` in group ``g`` and the selected chunks ``i_1..i_k`` with
weights ``w_1..w_k``:

    o_th = sum_j w_tgj * sum_{s in chunk i_j} softmax_s(<q_th, K_s> / sqrt(D)) V_s,

a separate softmax inside every chunk, mixed by the retrieval weights (not one softmax
over the union of the chunks as in NSA's selection branch).

Paths: ``"torch"`` gathers the ``k`` chunks of every query (memory ``O(T k S D)``, queries
processed in blocks), ``"triton"`` calls ``lc_kernels.selected_attention`` once per slot
(one selected block per query gives exactly the per-chunk softmax; the Triton kernels run
on CUDA, or on CPU under Triton's interpreter), ``"auto"`` takes the kernel on CUDA and
the gather elsewhere.
[hsa_attention_reference][lc_attention.hsa.attention.hsa_attention_reference] is the
dense oracle: every visible chunk, softmax weights over all of them.
"""

from __future__ import annotations

import math

import torch

from lc_attention import _backends
from lc_attention.hsa.retrieval import chunk_scores
from lc_kernels.backend import Backend
from lc_kernels.renames import renamed_params, spelled

__all__ = ["hsa_attention", "hsa_attention_reference"]

#: the backends of the chunk attention
BACKENDS: tuple[Backend, ...] = (Backend.AUTO, Backend.TORCH, Backend.TRITON)
#: the spelling of lc-attention 0.14 and earlier (deprecated in 0.14.1), refused since 0.16
REMOVED_BACKENDS = {"kernel": Backend.TRITON}


def check_backend(backend: object, name: str = "backend") -> Backend:
    """``backend`` as a member of ``BACKENDS``; ``ValueError`` for anything else.

    The removed spelling ``"kernel"`` is refused with a message naming ``"triton"``.
    """
    return _backends.check_backend(backend, BACKENDS, REMOVED_BACKENDS, name)


def _check(q: torch.Tensor, chunk_k: torch.Tensor, chunk_v: torch.Tensor) -> tuple[int, ...]:
    if q.ndim != 4 or chunk_k.ndim != 5 or chunk_v.shape != chunk_k.shape:
        raise ValueError(
            "q must be [B, T, H, D] and chunk_k, chunk_v [B, C, S, G, D] (equal shapes), got "
            f"{tuple(q.shape)}, {tuple(chunk_k.shape)}, {tuple(chunk_v.shape)}"
        )
    b, t, h, d = q.shape
    bk, c, s, g, dk = chunk_k.shape
    if bk != b or dk != d:
        raise ValueError(
            f"batch/head_dim mismatch: q {tuple(q.shape)}, chunk_k {tuple(chunk_k.shape)}"
        )
    if h % g:
        raise ValueError(f"query heads ({h}) must be a multiple of key/value heads ({g})")
    return b, t, h, d, c, s, g


def _gather_block(
    q: torch.Tensor,
    kp: torch.Tensor,
    vp: torch.Tensor,
    indices: torch.Tensor,
    weights: torch.Tensor,
) -> torch.Tensor:
    """One query block. ``q [B,Tb,G,R,D]``, ``kp/vp [B,G,C,S,D]``, ``indices/weights [B,Tb,G,k]``."""
    b, tb, g, r, d = q.shape
    k = indices.shape[-1]
    idx = indices.clamp(min=0).permute(0, 2, 1, 3).reshape(b, g, tb * k)
    bi = torch.arange(b, device=q.device)[:, None, None]
    gi = torch.arange(g, device=q.device)[None, :, None]
    kg = kp[bi, gi, idx].view(b, g, tb, k, kp.shape[3], d)  # [B,G,Tb,k,S,D]
    vg = vp[bi, gi, idx].view(b, g, tb, k, kp.shape[3], d)
    qg = q.permute(0, 2, 1, 3, 4)  # [B,G,Tb,R,D]
    logits = torch.einsum("bgtrd,bgtksd->bgtrks", qg, kg) / math.sqrt(d)
    per_chunk = torch.einsum("bgtrks,bgtksd->bgtrkd", logits.softmax(-1), vg)
    w = weights.permute(0, 2, 1, 3).to(per_chunk.dtype)  # [B,G,Tb,k]
    out = torch.einsum("bgtrkd,bgtk->bgtrd", per_chunk, w)
    return out.permute(0, 2, 1, 3, 4).reshape(b, tb, g * r, d)


def _kernel(
    q: torch.Tensor,
    chunk_k: torch.Tensor,
    chunk_v: torch.Tensor,
    indices: torch.Tensor,
    weights: torch.Tensor,
    backend: Backend,
) -> torch.Tensor:
    from lc_kernels import selected_attention

    b, t, h, d = q.shape
    _, c, s, g, _ = chunk_k.shape
    if c * s > t:
        raise ValueError(f"kernel path needs the chunks inside the sequence (C*S={c * s} > T={t})")
    pad = t - c * s
    k_flat = torch.nn.functional.pad(chunk_k.reshape(b, c * s, g, d), (0, 0, 0, 0, 0, pad))
    v_flat = torch.nn.functional.pad(chunk_v.reshape(b, c * s, g, d), (0, 0, 0, 0, 0, pad))
    r = h // g
    out = torch.zeros_like(q, dtype=torch.float32)
    for j in range(indices.shape[-1]):
        o = selected_attention(
            q, k_flat, v_flat, indices[..., j : j + 1].contiguous(), block_size=s, backend=backend
        )
        w = weights[..., j].repeat_interleave(r, dim=2)[..., None]  # [B,T,H,1]
        out = out + o.float() * w
    return out.to(q.dtype)


@renamed_params({"query_block": "query_chunk"}, "lc-attention 0.17")
def hsa_attention(
    q: torch.Tensor,
    chunk_k: torch.Tensor,
    chunk_v: torch.Tensor,
    indices: torch.Tensor,
    weights: torch.Tensor,
    *,
    backend: Backend | str = "auto",
    query_chunk: int = 1024,
) -> torch.Tensor:
    """Attention of every query into its selected chunks, mixed by the retrieval weights.

    Args:
        q: ``[B, T, H, D]`` queries (positions ``0..T-1``).
        chunk_k: ``[B, C, S, G, D]`` keys of the ``C`` chunks of ``S`` tokens (``G`` divides ``H``).
        chunk_v: ``[B, C, S, G, D]`` values.
        indices: ``[B, T, G, k]`` selected chunk ids, ``-1`` = unused slot (weight must be 0).
        weights: ``[B, T, G, k]`` mixing weights (from
            [select_chunks][lc_attention.hsa.retrieval.select_chunks]).
        backend: a [Backend][lc_kernels.backend.Backend]: ``"auto"`` (the kernel on CUDA,
            the gather path elsewhere), ``"torch"`` (gather) or ``"triton"``
            (``lc_kernels.selected_attention``'s kernels; ``"kernel"`` of 0.14 was removed
            in 0.16).
        query_chunk: queries per chunk on the gather path (bounds memory at long ``T``;
            ``query_block`` until 0.15: warns, removed in 0.17).

    Returns:
        ``[B, T, H, D]`` in the dtype of ``q``; a query with no selected chunk gets 0.

    Example:
        >>> import torch
        >>> q = torch.randn(1, 8, 4, 16); kv = torch.randn(1, 2, 4, 2, 16)
        >>> idx = torch.zeros(1, 8, 2, 1, dtype=torch.long); w = torch.ones(1, 8, 2, 1)
        >>> hsa_attention(q, kv, kv, idx, w, backend="torch").shape
        torch.Size([1, 8, 4, 16])
    """
    b, t, h, d, _c, _s, g = _check(q, chunk_k, chunk_v)
    if indices.shape != weights.shape or indices.shape[:3] != (b, t, g):
        raise ValueError(
            f"indices and weights must be [B, T, G, k] = [{b}, {t}, {g}, k], got "
            f"{tuple(indices.shape)} and {tuple(weights.shape)}"
        )
    choice = check_backend(backend)
    if query_chunk < 1:
        raise ValueError(f"{spelled('query_chunk')} must be >= 1, got {query_chunk}")
    if choice == Backend.AUTO and q.is_cuda:
        return _kernel(q, chunk_k, chunk_v, indices, weights, Backend.AUTO)
    if choice == Backend.TRITON:
        return _kernel(q, chunk_k, chunk_v, indices, weights, Backend.TRITON)
    kp = chunk_k.permute(0, 3, 1, 2, 4)  # [B,G,C,S,D]
    vp = chunk_v.permute(0, 3, 1, 2, 4)
    qg = q.view(b, t, g, h // g, d)
    outs = [
        _gather_block(
            qg[:, a : a + query_chunk],
            kp,
            vp,
            indices[:, a : a + query_chunk],
            weights[:, a : a + query_chunk],
        )
        for a in range(0, t, query_chunk)
    ]
    return torch.cat(outs, dim=1).to(q.dtype)


def hsa_attention_reference(
    q: torch.Tensor,
    chunk_k: torch.Tensor,
    chunk_v: torch.Tensor,
    retrieval_q: torch.Tensor,
    landmarks: torch.Tensor,
) -> torch.Tensor:
    """Dense oracle (fp32, fp64 for fp64 inputs): attend into every complete past chunk, softmax weights over all.

    Equals [hsa_attention][lc_attention.hsa.attention.hsa_attention] with the indices and
    weights of [select_chunks][lc_attention.hsa.retrieval.select_chunks] whenever ``topk``
    is at least the number of visible chunks (e.g. ``topk = C``). ``O(T C S)`` memory:
    for tests and short sequences.

    Args:
        q: ``[B, T, H, D]`` queries.
        chunk_k: ``[B, C, S, G, D]`` chunk keys.
        chunk_v: ``[B, C, S, G, D]`` chunk values.
        retrieval_q: ``[B, T, G, d_r]`` retrieval queries.
        landmarks: ``[B, C, G, d_r]`` chunk landmarks.

    Returns:
        ``[B, T, H, D]`` in the dtype of ``q``.

    Example:
        >>> import torch
        >>> q = torch.randn(1, 8, 2, 4); kv = torch.randn(1, 2, 4, 1, 4)
        >>> hsa_attention_reference(q, kv, kv, torch.randn(1, 8, 1, 3), torch.randn(1, 2, 1, 3)).shape
        torch.Size([1, 8, 2, 4])
    """
    b, t, h, d, _c, s, g = _check(q, chunk_k, chunk_v)
    scores = chunk_scores(retrieval_q, landmarks, s)  # [B,T,G,C]
    visible = torch.isfinite(scores)
    w = torch.softmax(scores.masked_fill(~visible, -1e30), dim=-1) * visible
    acc = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(acc).view(b, t, g, h // g, d)
    logits = torch.einsum("btgrd,bcsgd->btgrcs", qf, chunk_k.to(acc)) / math.sqrt(d)
    per_chunk = torch.einsum("btgrcs,bcsgd->btgrcd", logits.softmax(-1), chunk_v.to(acc))
    out = torch.einsum("btgrcd,btgc->btgrd", per_chunk, w.to(acc))
    return out.reshape(b, t, h, d).to(q.dtype)
