"""Bridge to ``lc_kernels.decode`` (retrieval/sparse decode attention, block top-k).

The public functions of ``lc_kernels.decode`` are used when present; while only its
references exist, the same-named reference functions are used. Keyword arguments the
installed version does not accept (e.g. ``block_size`` before the Triton kernels land)
are dropped, so this module tracks that API without pinning its optional arguments.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import torch

_PUBLIC = {
    "retrieval": "retrieval_decode_attention",
    "sparse": "sparse_decode_attention",
}
_REFERENCE = {
    "retrieval": "retrieval_decode_attention_reference",
    "sparse": "sparse_decode_attention_reference",
}


def _resolve(op: str) -> Callable[..., Any]:
    try:
        mod = importlib.import_module("lc_kernels.decode")
        fn = getattr(mod, _PUBLIC[op], None)
        if fn is not None:
            return fn  # type: ignore[no-any-return]
    except ImportError:
        pass
    try:
        ref = importlib.import_module("lc_kernels.decode.reference")
    except ImportError as exc:
        raise RuntimeError(
            "backend='triton' needs lc_kernels.decode (retrieval/sparse decode attention); "
            "use backend='torch' with this lc-kernels version"
        ) from exc
    return getattr(ref, _REFERENCE[op])  # type: ignore[no-any-return]


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    params = inspect.signature(fn).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return fn(*args, **kwargs)


def kernels_available() -> bool:
    """Whether ``lc_kernels.decode`` (public API or references) can be imported."""
    try:
        _resolve("retrieval")
    except RuntimeError:
        return False
    return True


def retrieval(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    topk: int,
    *,
    scale: float,
    block_size: int,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``lc_kernels.decode.retrieval_decode_attention``: ``(out [B,H,D], idx [B,H,topk])``."""
    fn = _resolve("retrieval")
    out, idx = _call(
        fn, q, k_cache, v_cache, topk, scale=scale, block_size=block_size, backend=backend
    )
    return out, idx


def sparse(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor,
    *,
    scale: float,
    backend: str = "auto",
) -> torch.Tensor:
    """``lc_kernels.decode.sparse_decode_attention``: ``out [B,H,D]``."""
    fn = _resolve("sparse")
    return _call(fn, q, k_cache, v_cache, indices, scale=scale, backend=backend)  # type: ignore[no-any-return]
