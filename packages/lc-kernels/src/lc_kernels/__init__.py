"""Triton GPU kernels with exact PyTorch references.

Every op lives in its own sub-package with ``reference.py`` (plain PyTorch, the test
oracle and the CPU path) and ``triton.py`` (the GPU kernels). Public functions take
``backend="auto" | "triton" | "torch"``; ``auto`` means Triton on CUDA tensors and the
reference elsewhere. Attention tensors use the layout ``[batch, seq, heads, head_dim]``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("lc-kernels")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
