"""Decode-time hyper-parameters of LycheeDecode."""

from __future__ import annotations

from dataclasses import dataclass

from lc_attention import _backends
from lc_kernels.backend import Backend

#: the backends of LycheeDecode's decode step
BACKENDS: tuple[Backend, ...] = (Backend.AUTO, Backend.TORCH, Backend.TRITON)
#: spellings of lc-attention 0.13 and earlier (deprecated in 0.14), refused since 0.16
REMOVED_BACKENDS = {"gather": Backend.TORCH, "kernels": Backend.TRITON}


def check_backend(backend: object, name: str = "backend") -> Backend:
    """``backend`` as a member of ``BACKENDS``; ``ValueError`` for anything else.

    The removed spellings ``"gather"`` and ``"kernels"`` are refused with a message naming
    ``"torch"`` and ``"triton"``.
    """
    return _backends.check_backend(backend, BACKENDS, REMOVED_BACKENDS, name)


def route(backend: str, cuda: bool, padded: bool) -> Backend | None:
    """Where a decode step runs: ``None`` for the PyTorch gather path, else the backend
    handed to ``lc_kernels.decode`` (``"triton"``, or ``"auto"`` for ``"auto"`` on
    CUDA). ``backend`` was checked by ``check_backend``."""
    if backend == "torch":
        return None
    if backend == "auto":
        return Backend.AUTO if cuda and not padded else None
    if padded:
        raise ValueError("valid (padding) masks are supported by backend='torch' only")
    return Backend.TRITON


@dataclass(frozen=True)
class LycheeConfig:
    """How hybrid-head decoding runs (the roles themselves live in a ``RoleMap``).

    Args:
        topk: token positions each retrieval head publishes and each sparse head
            attends to (the paper's token budget).
        block_size: block length of the block-wise top-k of the retrieval heads (the
            ``"triton"`` backend keeps a partial top-k per block, then merges; the
            ``"torch"`` backend keeps the ``topk`` blocks with the largest maxima, then
            selects among their elements). Both give the exact top-k, so this is a speed
            knob, not a quality knob.
        backend: a [Backend][lc_kernels.backend.Backend]: ``"triton"`` calls
            ``lc_kernels.decode``'s Triton kernels; ``"torch"`` is plain PyTorch that
            reads only the selected rows of the cache (the fast path on CPU); ``"auto"``
            picks ``lc_kernels.decode`` on CUDA and ``"torch"`` elsewhere. The spellings
            ``"kernels"`` and ``"gather"`` of 0.13 were removed in 0.16 (``ValueError``
            naming ``"triton"`` / ``"torch"``).

    Raises:
        ValueError: a field out of range (the message names field, value and allowed).

    Example:
        >>> LycheeConfig(topk=128).block_size
        16
    """

    topk: int = 256
    block_size: int = 16
    backend: Backend | str = Backend.AUTO

    def __post_init__(self) -> None:
        for name in ("topk", "block_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        object.__setattr__(self, "backend", check_backend(self.backend))
