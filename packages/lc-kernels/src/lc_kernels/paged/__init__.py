"""Paged key/value memory: page pools, gather/scatter, chunk attention over a paged past."""

from __future__ import annotations

from lc_kernels.paged.attention import PagedKV, paged_chunk_attention
from lc_kernels.paged.pool import PageLayout, PagePool
from lc_kernels.paged.reference import paged_gather, paged_scatter

__all__ = [
    "PageLayout",
    "PagePool",
    "PagedKV",
    "paged_chunk_attention",
    "paged_gather",
    "paged_scatter",
]
