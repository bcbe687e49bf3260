"""Decode-step kernels of hybrid-head sparse decoding (LycheeDecode).

Retrieval heads: :func:`retrieval_decode_attention` (full attention + top-k positions).
Sparse heads: :func:`sparse_decode_attention` (attention over given positions only).
:func:`block_topk`: exact block-wise top-k with a deterministic tie rule (lower position
wins). Caches use the layout ``[batch, seq, kv_heads, head_dim]``; queries of one decode
step are ``[batch, q_heads, head_dim]``.
"""

from __future__ import annotations

from lc_kernels.decode.api import (
    block_topk,
    full_decode_attention,
    retrieval_decode_attention,
    sparse_decode_attention,
)
from lc_kernels.decode.reference import (
    full_decode_attention_reference,
    retrieval_decode_attention_reference,
    sparse_decode_attention_reference,
    topk_reference,
)

__all__ = [
    "block_topk",
    "full_decode_attention",
    "full_decode_attention_reference",
    "retrieval_decode_attention",
    "retrieval_decode_attention_reference",
    "sparse_decode_attention",
    "sparse_decode_attention_reference",
    "topk_reference",
]
