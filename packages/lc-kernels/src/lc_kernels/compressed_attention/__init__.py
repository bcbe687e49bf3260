"""Compression branch of Native Sparse Attention, top-k block selection and InfLLM-v2 group block scores."""

from __future__ import annotations

# the selection rule lives in lc_kernels.block_select; kept importable from here
from lc_kernels.block_select.reference import topk_blocks_from_scores
from lc_kernels.compressed_attention.api import (
    compressed_attention,
    group_block_scores,
    select_blocks,
)
from lc_kernels.compressed_attention.reference import (
    block_scores_reference,
    group_block_scores_reference,
    mean_pool_compress,
    num_compressed,
    num_query_groups,
)

__all__ = [
    "block_scores_reference",
    "compressed_attention",
    "group_block_scores",
    "group_block_scores_reference",
    "mean_pool_compress",
    "num_compressed",
    "num_query_groups",
    "select_blocks",
    "topk_blocks_from_scores",
]
