"""Paged key/value memory: page pools, gather/scatter, chunk attention over a paged past."""

from __future__ import annotations

from lc_kernels.paged.attention import (
    PagedKV,
    paged_chunk_attention,
    paged_chunk_attention_backward,
    paged_chunk_attention_forward,
)
from lc_kernels.paged.ops import paged_gather, paged_scatter
from lc_kernels.paged.pool import PageLayout, PagePool

__all__ = [
    "PageLayout",
    "PagePool",
    "PagedKV",
    "paged_chunk_attention",
    "paged_chunk_attention_backward",
    "paged_chunk_attention_forward",
    "paged_gather",
    "paged_scatter",
]
