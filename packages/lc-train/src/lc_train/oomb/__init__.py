"""Chunk-recurrent memory-efficient long-context training (OOMB).

Exact loss and gradients of a causal LM over sequences far longer than activation memory
allows: activations are held for one chunk at a time, keys/values and their gradients in
fixed-size pages.
"""

from __future__ import annotations

from lc_train.oomb.config import ChunkRecurrentConfig
from lc_train.oomb.trainer import ChunkRecurrentResult, chunk_recurrent_backward

__all__ = ["ChunkRecurrentConfig", "ChunkRecurrentResult", "chunk_recurrent_backward"]
