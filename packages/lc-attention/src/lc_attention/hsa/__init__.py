"""Hierarchical chunk sparse attention (arXiv 2510.17196): chunk encoder with a CLS landmark,
top-k chunk retrieval, token-level attention into the retrieved chunks, a bypassing
residual merge and sliding-window attention for the local context.

[select_chunks][lc_attention.hsa.retrieval.select_chunks] picks the chunks,
[hsa_attention][lc_attention.hsa.attention.hsa_attention] reads them,
[HSATransformer][lc_attention.hsa.model.HSATransformer] puts it together.
"""

from __future__ import annotations

from lc_attention.hsa.attention import hsa_attention, hsa_attention_reference
from lc_attention.hsa.model import (
    ChunkEncoder,
    ChunkMemory,
    ChunkSelection,
    ChunkSparseAttention,
    HSABlock,
    HSATransformer,
    HSATransformerConfig,
    SlidingWindowSelfAttention,
)
from lc_attention.hsa.retrieval import chunk_scores, select_chunks, visible_chunks

__all__ = [
    "ChunkEncoder",
    "ChunkMemory",
    "ChunkSelection",
    "ChunkSparseAttention",
    "HSABlock",
    "HSATransformer",
    "HSATransformerConfig",
    "SlidingWindowSelfAttention",
    "chunk_scores",
    "hsa_attention",
    "hsa_attention_reference",
    "select_chunks",
    "visible_chunks",
]
