"""Block selection shared by the sparse attention methods (NSA, DSSA, LycheeDecode).

- The forced-block rule: [forced_block_mask][lc_kernels.block_select.reference.forced_block_mask]
  and its id-list form [forced_block_ids][lc_kernels.block_select.reference.forced_block_ids]
  (the first ``init_blocks`` blocks and the ``local_blocks`` most recent ones, never a
  future block).
- [topk_blocks_from_scores][lc_kernels.block_select.reference.topk_blocks_from_scores]:
  that rule plus the top-k of block scores ``[B, T, H_kv, NB]`` (NSA's selection branch,
  DSSA's stage 1; ``torch.topk`` on the scores' device).
- Exact top-k of token scores through blocks:
  [block_max_topk][lc_kernels.block_select.reference.block_max_topk] (PyTorch, block
  maxima first: LycheeDecode's CPU path) and [block_topk][lc_kernels.decode.block_topk]
  (per-block partial top-k and a merge, with a Triton kernel on CUDA and a deterministic
  tie rule: LycheeDecode's kernel path).
"""

from __future__ import annotations

from lc_kernels.block_select.reference import (
    block_max_topk,
    cached_arange,
    forced_block_ids,
    forced_block_mask,
    topk_blocks_from_scores,
)
from lc_kernels.decode.api import block_topk

__all__ = [
    "block_max_topk",
    "block_topk",
    "cached_arange",
    "forced_block_ids",
    "forced_block_mask",
    "topk_blocks_from_scores",
]
