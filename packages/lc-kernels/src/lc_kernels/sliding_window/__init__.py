"""Causal sliding-window attention (NSA's third branch) on PyTorch SDPA."""

from __future__ import annotations

from lc_kernels.sliding_window.api import sliding_window_attention

__all__ = ["sliding_window_attention"]
