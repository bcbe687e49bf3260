"""Long-context training systems and objectives.

- :mod:`lc_train.oomb`: chunk-recurrent training with exact gradients over paged
  key/value memory (activation memory of one chunk, whatever the sequence length).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from lc_train.oomb import ChunkRecurrentConfig, ChunkRecurrentResult, chunk_recurrent_backward

try:
    __version__: str = version("lc-train")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "ChunkRecurrentConfig",
    "ChunkRecurrentResult",
    "__version__",
    "chunk_recurrent_backward",
]
