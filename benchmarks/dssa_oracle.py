"""Oracle block selection for DSSA: a probe of what any block score could reach.

DSSA picks blocks by an estimate (attention to mean-pooled keys). The oracle replaces
that estimate by the true attention mass of every key block: the causal softmax over
all keys, summed over the query heads of each KV head, the queries of each
``query_block`` group and the keys of each block. Forced blocks (initial, local), the
exclusion of future blocks, the top-k and the block-sparse attention are DSSA's own.
So the oracle at a budget bounds what a better training-free score can do there. It
costs a dense attention per call: an analysis tool, not a fast path.

    from dssa_oracle import oracle_selection
    with enable_dssa(model, cfg), oracle_selection():
        out = model(ids)

``benchmarks/dssa_quality.py`` runs it as a mode with ``--config NAME:...,select=oracle``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from unittest import mock

import torch
import torch.nn.functional as F

import lc_attention.hf
from lc_attention.dssa import DSSAConfig, sparse_stage
from lc_attention.dssa.selection import query_groups
from lc_kernels.compressed_attention import topk_blocks_from_scores

CHUNK = 256  # queries whose [chunk, HQ, S] probabilities are held at a time


@torch.no_grad()
def oracle_block_scores(
    query: torch.Tensor, key: torch.Tensor, start: int, config: DSSAConfig, scale: float
) -> torch.Tensor:
    """True attention mass of every key block per query group and KV head.

    Args:
        query: ``[B, T, HQ, D]`` queries at key positions ``start .. start + T - 1``.
        key: ``[B, S, H_kv, D]`` keys.
        start: key position of the first query.
        config: DSSA config (``block_size``, ``query_block``).
        scale: softmax scale.

    Returns:
        ``[B, NG, H_kv, NB]`` float32: for each group of ``config.query_block`` queries,
        the causal softmax probabilities of its queries and of the query heads of each KV
        head, summed over the keys of each block of ``block_size``.
    """
    b, t, hq, d = query.shape
    s, hkv = key.shape[1], key.shape[2]
    bs, qb = config.block_size, config.query_block
    nb = -(-s // bs)
    gid, last = query_groups(start, qb, t)
    out = torch.zeros(b, last.shape[0], hkv, nb, dtype=torch.float32)
    k = key.float()
    for a in range(0, t, CHUNK):
        e = min(t, a + CHUNK)
        q = query[:, a:e].float().reshape(b, e - a, hkv, hq // hkv, d)
        logits = torch.einsum("bthgd,bshd->bthgs", q, k) * scale
        future = torch.arange(s) > torch.arange(start + a, start + e).unsqueeze(1)  # [T', S]
        logits.masked_fill_(future.view(1, e - a, 1, 1, s), -math.inf)
        p = logits.softmax(-1).sum(3)  # [B, T', H_kv, S]
        p = F.pad(p, (0, nb * bs - s)).view(b, e - a, hkv, nb, bs).sum(-1)
        out.index_add_(1, gid[a:e], p)
    return out


def oracle_dssa_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    config: DSSAConfig,
    scale: float | None = None,
    attention_mask: torch.Tensor | None = None,
    cache: object | None = None,
    layer_idx: int | None = None,
) -> torch.Tensor:
    """``dssa_attention`` with the blocks chosen by
    [oracle_block_scores][dssa_oracle.oracle_block_scores] (same signature; ``cache``
    is not needed). Sparse mode only: the Hugging Face function has already sent short
    keys and dense layers to SDPA. ``[B, T, HQ, D]`` in, ``[B, T, HQ, D]`` out."""
    if attention_mask is not None and not bool(attention_mask.all()):
        raise ValueError("the oracle probe supports unpadded batches only")
    t, s = query.shape[1], key.shape[1]
    start = s - t
    sc = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = oracle_block_scores(query, key, start, config, sc)
    _, last = query_groups(start, config.query_block, t)
    idx = topk_blocks_from_scores(
        scores, config.block_size, config.topk, config.init_blocks, config.local_blocks, last
    )
    return sparse_stage(query, key, value, idx, config, sc)


@dataclass(frozen=True)
class OracleConfig(DSSAConfig):
    """A [DSSAConfig][lc_attention.dssa.DSSAConfig] that marks a benchmark mode whose
    blocks are chosen by the oracle (run it inside
    [oracle_selection][dssa_oracle.oracle_selection])."""


@contextlib.contextmanager
def oracle_selection() -> Iterator[None]:
    """Inside the block, models switched on with ``enable_dssa`` select by the oracle."""
    with mock.patch.object(lc_attention.hf, "dssa_attention", oracle_dssa_attention):
        yield
