"""Optional GPU kernels: flash-linear-attention (``fla``) and NX-AI ``mlstm_kernels``.

Neither library is a dependency. ``backend="auto"`` uses a kernel library only when it is
importable and the inputs live on CUDA; ``"torch"`` always runs the PyTorch code of this
package; asking for a library by name when it is missing raises a clear ``ImportError``.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import torch

GLA_BACKENDS = ("auto", "torch", "fla")
MLSTM_BACKENDS = ("auto", "torch", "mlstm_kernels")

_INSTALL = {
    "fla": "pip install flash-linear-attention",
    "mlstm_kernels": "pip install mlstm_kernels",
}


def available(library: str) -> bool:
    """Whether ``library`` (``"fla"`` or ``"mlstm_kernels"``) can be imported."""
    return importlib.util.find_spec(library) is not None


def resolve(backend: str, allowed: tuple[str, ...], x: torch.Tensor) -> str:
    """Turn a requested backend into ``"torch"`` or a library name.

    Raises:
        ValueError: unknown backend, or a GPU library requested for non-CUDA tensors.
        ImportError: a GPU library requested by name but not installed.
    """
    if backend not in allowed:
        raise ValueError(f"backend must be one of {allowed}, got {backend!r}")
    if backend == "torch":
        return "torch"
    if backend == "auto":
        library = allowed[-1]
        return library if x.is_cuda and available(library) else "torch"
    if not available(backend):
        raise ImportError(
            f"backend={backend!r} needs the optional GPU kernel library {backend!r}, which is "
            f"not installed ({_INSTALL[backend]}); use backend='torch' for the PyTorch path"
        )
    if not x.is_cuda:
        raise ValueError(f"backend={backend!r} runs on CUDA tensors only, got device {x.device}")
    return backend


def load(module: str, name: str) -> Any:
    """``getattr(import_module(module), name)``, imported on demand."""
    return getattr(importlib.import_module(module), name)
