"""DSSA: dense-sparse switchable attention (InfLLM-v2), parameter-free.

Dense attention below ``dense_len`` keys; above it, each query attends to the top-k
key blocks chosen from max-pooled, group-summed scores against mean-pooled keys, plus
forced initial and local blocks (optionally one selection per block of queries,
``query_block``). Training-free options: other block scores (``block_score``:
span means and variances, or per-block key bounds) and dense first layers
(``dense_layers``). It reuses a model's own projections, so it applies
to a pretrained model without training (see [lc_attention.hf][]).
"""

from __future__ import annotations

from lc_attention.dssa.attention import dense_attention, dssa_attention, sparse_stage
from lc_attention.dssa.cache import CompressedKeyCache
from lc_attention.dssa.config import DSSAConfig
from lc_attention.dssa.selection import (
    block_bounds,
    block_scores,
    bound_logits,
    compress_keys,
    select_blocks,
    select_group_blocks,
)
from lc_attention.dssa.sparse import block_major_selected_attention

__all__ = [
    "CompressedKeyCache",
    "DSSAConfig",
    "block_bounds",
    "block_major_selected_attention",
    "block_scores",
    "bound_logits",
    "compress_keys",
    "dense_attention",
    "dssa_attention",
    "select_blocks",
    "select_group_blocks",
    "sparse_stage",
]
