"""Top-k chunk retrieval: which complete past chunks each query reads, and with what weight.

For query position ``t`` and retrieval head ``g`` the score of chunk ``c`` is

    s_tgc = <r_tg, l_cg> / sqrt(d_r),

with ``r`` the retrieval query and ``l`` the chunk's landmark (the chunk encoder's CLS
output). Chunk ``c`` (tokens ``c*S .. c*S + S - 1``) is visible to ``t`` only once it is
complete, i.e. when ``(c + 1) * S <= t``. Each query keeps the ``k`` visible chunks with the
largest scores (exactly ``k`` once ``t`` has seen ``k`` chunks; unused slots carry index
``-1`` and weight 0) and weights them by a softmax over the kept scores:

    w_tgj = exp(s_tg,i_j) / sum_{j'} exp(s_tg,i_j').

The indices are discrete; the gradient reaches the scores (hence the retrieval queries,
the landmarks and the chunk encoder) through these weights.
"""

from __future__ import annotations

import math

import torch

from lc_kernels.renames import renamed_params, spelled

__all__ = ["chunk_scores", "select_chunks", "visible_chunks"]


def visible_chunks(
    num_queries: int, num_chunks: int, chunk_size: int, q_offset: int, device: torch.device
) -> torch.Tensor:
    """``[Tq, C]`` bool, True where chunk ``c`` is complete before query ``q_offset + i``.

    Example:
        >>> visible_chunks(3, 2, 2, 2, torch.device("cpu")).int().tolist()
        [[1, 0], [1, 0], [1, 1]]
    """
    t = torch.arange(q_offset, q_offset + num_queries, device=device)[:, None]
    end = (torch.arange(num_chunks, device=device)[None, :] + 1) * chunk_size
    return end <= t


def chunk_scores(
    retrieval_q: torch.Tensor, landmarks: torch.Tensor, chunk_size: int, q_offset: int = 0
) -> torch.Tensor:
    """Causally masked retrieval scores.

    Args:
        retrieval_q: ``[B, Tq, G, d_r]`` retrieval queries (``G`` retrieval heads).
        landmarks: ``[B, C, G, d_r]`` one landmark per chunk and head.
        chunk_size: tokens per chunk ``S``.
        q_offset: absolute position of the first query.

    Returns:
        ``[B, Tq, G, C]`` scores (fp32, fp64 for fp64 inputs), ``-inf`` for chunks not yet
        complete.

    Example:
        >>> import torch
        >>> s = chunk_scores(torch.ones(1, 4, 1, 2), torch.ones(1, 2, 1, 2), 2)
        >>> bool(s[0, 1].isinf().all()), bool(s[0, 3].isinf().any())
        (True, True)
    """
    if retrieval_q.ndim != 4 or landmarks.ndim != 4:
        raise ValueError(
            "retrieval_q must be [B, Tq, G, d_r] and landmarks [B, C, G, d_r], got "
            f"{tuple(retrieval_q.shape)} and {tuple(landmarks.shape)}"
        )
    b, tq, g, d = retrieval_q.shape
    if landmarks.shape[0] != b or landmarks.shape[2:] != (g, d):
        raise ValueError(
            f"landmarks {tuple(landmarks.shape)} do not match retrieval_q {tuple(retrieval_q.shape)}"
        )
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    acc = torch.promote_types(retrieval_q.dtype, torch.float32)
    s = torch.einsum("btgd,bcgd->btgc", retrieval_q.to(acc), landmarks.to(acc)) / math.sqrt(d)
    vis = visible_chunks(tq, landmarks.shape[1], chunk_size, q_offset, s.device)
    return s.masked_fill(~vis[None, :, None, :], float("-inf"))


@renamed_params({"top_k": "topk"}, "lc-attention 0.17")
def select_chunks(
    scores: torch.Tensor, topk: int, noise: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the ``topk`` best visible chunks per query and weight them by a softmax.

    Args:
        scores: ``[B, Tq, G, C]`` scores from
            [chunk_scores][lc_attention.hsa.retrieval.chunk_scores] (``-inf`` = invisible).
        topk: chunks kept per query, ``1 <= topk <= C`` (``top_k`` until 0.15: warns,
            removed in 0.17).
        noise: optional ``[B, Tq, G, C]`` perturbation added to the scores for the choice
            only (e.g. Gumbel noise during training); the weights use the clean scores.

    Returns:
        ``indices [B, Tq, G, topk]`` int64 chunk ids (``-1`` for unused slots, which occur
        only while fewer than ``topk`` chunks are visible) and ``weights [B, Tq, G, topk]``
        fp32 (each row sums to 1, or is all 0 when no chunk is visible).

    Example:
        >>> import torch
        >>> s = torch.tensor([[[[0.0, 2.0, 1.0, float("-inf")]]]])
        >>> idx, w = select_chunks(s, 2)
        >>> idx.tolist()
        [[[[1, 2]]]]
    """
    if scores.ndim != 4:
        raise ValueError(f"scores must be [B, Tq, G, C], got {tuple(scores.shape)}")
    c = scores.shape[-1]
    if not 1 <= topk <= c:
        raise ValueError(f"{spelled('topk')} must lie in [1, number of chunks = {c}], got {topk}")
    pick = scores if noise is None else scores + noise
    _, idx = pick.topk(topk, dim=-1)
    sel = scores.gather(-1, idx)
    valid = torch.isfinite(sel)
    w = torch.softmax(sel.masked_fill(~valid, -1e30), dim=-1) * valid
    return idx.masked_fill(~valid, -1), w
