"""Long-context attention layers as ``torch.nn.Module`` objects and their Hugging Face
integration. Layers call lc-kernels for the heavy lifting and never own a training loop.

Native Sparse Attention: [NSAConfig][lc_attention.nsa.config.NSAConfig],
[NativeSparseAttention][lc_attention.nsa.layer.NativeSparseAttention] and the tiny
[NSATransformer][lc_attention.nsa.model.NSATransformer].
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__: str = version("lc-attention")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

_LAZY = {
    "NSAConfig": "lc_attention.nsa",
    "NativeSparseAttention": "lc_attention.nsa",
    "NSATransformer": "lc_attention.nsa",
    "CompressionMLP": "lc_attention.nsa",
    "NSACache": "lc_attention.nsa",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    """Import the torch-backed classes on first use, so ``import lc_attention`` stays light."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lc_attention' has no attribute {name!r}")
