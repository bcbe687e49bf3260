"""Selected (block-sparse) attention of Native Sparse Attention, in the NSA and FSA loop orders."""

from __future__ import annotations

from lc_kernels.selected_attention.api import selected_attention
from lc_kernels.selected_attention.reference import (
    dense_causal_attention_reference,
    selected_attention_reference,
    selection_mask,
)

__all__ = [
    "dense_causal_attention_reference",
    "selected_attention",
    "selected_attention_reference",
    "selection_mask",
]
