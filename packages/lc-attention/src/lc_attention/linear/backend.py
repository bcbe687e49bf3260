"""Optional GPU kernels: flash-linear-attention (``fla``) and NX-AI ``mlstm_kernels``.

Neither library is a dependency. The backend values are members of lc-kernels'
[Backend][lc_kernels.backend.Backend] (``Backend.FLA``, ``Backend.MLSTM_KERNELS``), the
one vocabulary of both packages. ``backend="auto"`` uses a kernel library only when it is
importable and the inputs live on CUDA; ``"torch"`` always runs the PyTorch code of this
package; asking for a library by name when it is missing raises a clear ``ImportError``.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import torch

from lc_kernels.backend import Backend, parse_backend

GLA_BACKENDS: tuple[Backend, ...] = (Backend.AUTO, Backend.TORCH, Backend.FLA)
MLSTM_BACKENDS: tuple[Backend, ...] = (Backend.AUTO, Backend.TORCH, Backend.MLSTM_KERNELS)

_INSTALL = {
    "fla": "pip install flash-linear-attention",
    "mlstm_kernels": "pip install mlstm_kernels",
}


def available(library: str) -> bool:
    """Whether ``library`` (``"fla"`` or ``"mlstm_kernels"``) can be imported."""
    return importlib.util.find_spec(library) is not None


def resolve(backend: Backend | str, allowed: tuple[Backend, ...], x: torch.Tensor) -> Backend:
    """Turn a requested backend into ``Backend.TORCH`` or a library's member.

    Raises:
        ValueError: unknown backend, or a GPU library requested for non-CUDA tensors.
        ImportError: a GPU library requested by name but not installed.
    """
    backend = parse_backend(backend, allowed)
    if backend is Backend.TORCH:
        return Backend.TORCH
    if backend is Backend.AUTO:
        library = allowed[-1]
        return library if x.is_cuda and available(library) else Backend.TORCH
    if not available(backend):
        raise ImportError(
            f"backend={backend.value!r} needs the optional GPU kernel library {backend.value!r}, which is "
            f"not installed ({_INSTALL[backend]}); use backend='torch' for the PyTorch path"
        )
    if not x.is_cuda:
        raise ValueError(
            f"backend={backend.value!r} runs on CUDA tensors only, got device {x.device}"
        )
    return backend


def load(module: str, name: str) -> Any:
    """``getattr(import_module(module), name)``, imported on demand."""
    return getattr(importlib.import_module(module), name)
