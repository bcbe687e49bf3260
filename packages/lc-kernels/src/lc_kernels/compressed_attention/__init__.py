"""Compression branch of Native Sparse Attention and top-k block selection."""

from __future__ import annotations

from lc_kernels.compressed_attention.api import compressed_attention, select_blocks
from lc_kernels.compressed_attention.reference import (
    block_scores_reference,
    mean_pool_compress,
    num_compressed,
    topk_blocks_from_scores,
)

__all__ = [
    "block_scores_reference",
    "compressed_attention",
    "mean_pool_compress",
    "num_compressed",
    "select_blocks",
    "topk_blocks_from_scores",
]
