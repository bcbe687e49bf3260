"""Native Sparse Attention: config, layer and a tiny transformer built from it."""

from __future__ import annotations

from lc_attention.nsa.cache import NSACache
from lc_attention.nsa.config import NSAConfig
from lc_attention.nsa.layer import CompressionMLP, NativeSparseAttention
from lc_attention.nsa.model import NSATransformer

__all__ = ["CompressionMLP", "NSACache", "NSAConfig", "NSATransformer", "NativeSparseAttention"]
