"""Long-context attention layers as ``torch.nn.Module`` objects and their Hugging Face
integration. Layers call lc-kernels for the heavy lifting and never own a training loop."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("lc-attention")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
